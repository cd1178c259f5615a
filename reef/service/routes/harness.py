"""The harness surface (docs/reference/http-api.md): the serving tree, its release chain, adapters, installer,
proposals."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from reef.core.errors import BadRequest, Forbidden, NotFound
from reef.core.releases import Release
from reef.harness.catalog import adapter_names, load_adapter
from reef.harness.install import install_script
from reef.harness.proposals import ProposalQueue
from reef.harness.published import check_proposal, harness_view
from reef.harness.render import render
from reef.harness.tree import load_tree
from reef.service.deps import json_object, scenario_of
from reef.service.middleware import held_scope
from reef.service.scopes import Scope, scope_words
from reef.service.state import runtime_of, state_of

router = APIRouter(tags=["harness"])


async def _release(request: Request, scenario: str, release_id: str | None) -> Release:
    runtime = runtime_of(request)
    if runtime.recipe.surface != "harness":
        raise NotFound(f"the recipe {runtime.recipe.name!r} does not evolve a harness")
    if not runtime.known_scenario(scenario):
        raise NotFound(f"unknown scenario {scenario!r}")
    store = runtime.release_store
    if release_id:
        release = await asyncio.to_thread(store.get, scenario, release_id)
        # A pending release may hold model-written code nobody reviewed yet: only an admin (the reviewer) sees it.
        if release.pending and held_scope(request.scope) < Scope.ADMIN:
            raise Forbidden(f"release {release_id} is pending review; reading it needs {scope_words(Scope.ADMIN)}")
        return release
    head = await asyncio.to_thread(store.head, scenario)
    if head is None:
        raise NotFound(f"scenario {scenario!r} has no release yet")
    return head


@router.get("/reef/harness", summary="The serving (or a given) release's harness files")
async def get_harness(
    request: Request,
    release_id: str | None = Query(None),
    version: str | None = Query(None, description="the reference client's name for release_id"),
    adapter: str | None = Query(None, description="default: harness.default_adapter"),
) -> Response:
    scenario = scenario_of(request)
    if release_id and version and release_id != version:
        raise BadRequest("give release_id or version, not two different ones", field="version")
    adapter = adapter or state_of(request).settings.harness.default_adapter
    load_adapter(adapter)
    release = await _release(request, scenario, release_id or version)
    directory = await asyncio.to_thread(runtime_of(request).release_store.materialize, release)
    view = await asyncio.to_thread(harness_view, release, directory, adapter)
    return JSONResponse(view, headers={"x-reef-release-id": release.release_id})


@router.get("/reef/harness/releases", summary="The scenario's harness releases, oldest first")
async def list_releases(request: Request) -> dict[str, Any]:
    scenario = scenario_of(request)
    return {"scenario": scenario, "releases": await _oldest_first(request, scenario)}


@router.get("/reef/harness/versions", summary="The same rows as `versions` (the reference client reads this)")
async def list_versions(request: Request) -> dict[str, Any]:
    scenario = scenario_of(request)
    return {"scenario": scenario, "versions": await _oldest_first(request, scenario)}


async def _oldest_first(request: Request, scenario: str) -> list[dict[str, Any]]:
    runtime = runtime_of(request)
    if not runtime.known_scenario(scenario):
        raise NotFound(f"unknown scenario {scenario!r}")
    releases = await asyncio.to_thread(runtime.releases, scenario)
    return [{**row, "artifact_version": row["release_id"]} for row in reversed(releases)]


@router.get("/reef/harness/adapters", summary="The adapters a harness renders for")
async def list_adapters() -> dict[str, Any]:
    return {"adapters": [load_adapter(name).to_json() for name in adapter_names()]}


@router.get("/reef/harness/install", summary="A POSIX sh installer for the serving harness")
async def install(request: Request, adapter: str = Query(...), release_id: str | None = Query(None)) -> Response:
    scenario = scenario_of(request)
    chosen = load_adapter(adapter)
    release = await _release(request, scenario, release_id)
    directory = await asyncio.to_thread(runtime_of(request).release_store.materialize, release)
    files = await asyncio.to_thread(lambda: render(load_tree(directory), chosen))
    script = install_script(
        chosen,
        files,
        release_id=release.release_id,
        scenario=scenario,
        base_url=str(request.base_url).rstrip("/"),
        model=_served_model(request),
    )
    return PlainTextResponse(script, media_type="text/x-shellscript", headers={"x-reef-release-id": release.release_id})


@router.post("/reef/harness/proposals", summary="Queue an agent's own proposal for the next evolution step")
async def propose(request: Request) -> Response:
    scenario = scenario_of(request)
    body = await json_object(request)
    runtime = runtime_of(request)
    if runtime.recipe.surface != "harness":
        raise NotFound(f"the recipe {runtime.recipe.name!r} does not evolve a harness")
    if not runtime.known_scenario(scenario):
        if not state_of(request).settings.reef.implicit_scenarios:
            raise NotFound(f"unknown scenario {scenario!r} (implicit creation is off; POST /reef/scenarios first)")
        await runtime.ensure_scenario(scenario)
    against = body.get("release_id")
    if against is not None and not isinstance(against, str):
        raise BadRequest("must be a release id", field="release_id")
    store = runtime.release_store
    head = (
        await asyncio.to_thread(store.get, scenario, against)
        if against
        else await asyncio.to_thread(store.head, scenario)
    )
    directory = await asyncio.to_thread(store.materialize, head) if head is not None else None
    mutations, reason = await asyncio.to_thread(check_proposal, body, directory)
    queue = ProposalQueue.for_settings(state_of(request).settings)
    proposal = await asyncio.to_thread(queue.append, scenario, mutations, reason, body.get("session"))
    runtime.notify(scenario)
    content = {"proposal_id": proposal["proposal_id"], "scenario": scenario, "queued": True}
    return JSONResponse(content, status_code=202)


def _served_model(request: Request) -> str:
    settings = state_of(request).settings
    named = settings.inference.served_model_name or settings.inference.upstream_model
    if named:
        return named
    models = state_of(request).engine.models()
    return str(models[0]["id"]) if models else "reef"
