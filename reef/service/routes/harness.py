"""The harness surface (docs/reference/http-api.md): the serving tree, its release chain, adapters, installer,
proposals."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from reef.core.errors import BadRequest, Conflict, Forbidden, NotFound
from reef.core.identifiers import RELEASE_ID_PATTERN
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


class ShellScript(PlainTextResponse):
    """A POSIX sh script (the installer), as the API document names its type."""

    media_type = "text/x-shellscript"


def _harness_scenario(request: Request, scenario: str) -> None:
    """404 unless the recipe evolves a harness and `scenario` exists."""
    runtime = runtime_of(request)
    if not runtime.recipe.surface.files:
        raise NotFound(f"the recipe {runtime.recipe.name!r} does not evolve a harness")
    if not runtime.known_scenario(scenario):
        raise NotFound(f"unknown scenario {scenario!r}")


async def _release(request: Request, scenario: str, release_id: str | None) -> Release:
    _harness_scenario(request, scenario)
    store = runtime_of(request).release_store
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
    release_id: str | None = Query(None, pattern=RELEASE_ID_PATTERN),
    version: str | None = Query(
        None, pattern=RELEASE_ID_PATTERN, description="the reference client's name for release_id"
    ),
    adapter: str | None = Query(None, description="default: harness.default_adapter"),
) -> Response:
    scenario = scenario_of(request)
    _harness_scenario(request, scenario)  # before the query's own checks: without a harness there is nothing to ask
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
    if held_scope(request.scope) < Scope.ADMIN:  # pending releases are the reviewer's; the open canary is served
        releases = [row for row in releases if not row["pending"] or row.get("canary")]
    return [{**row, "artifact_version": row["release_id"]} for row in reversed(releases)]


@router.get("/reef/harness/adapters", summary="The adapters a harness renders for")
async def list_adapters() -> dict[str, Any]:
    return {"adapters": [load_adapter(name).to_json() for name in adapter_names()]}


@router.get(
    "/reef/harness/install",
    summary="A POSIX sh installer for the serving harness",
    response_class=ShellScript,
    responses={200: {"description": "the script"}},
)
async def install(
    request: Request, adapter: str = Query(...), release_id: str | None = Query(None, pattern=RELEASE_ID_PATTERN)
) -> Response:
    scenario = scenario_of(request)
    chosen = load_adapter(adapter)
    release = await _release(request, scenario, release_id)
    if release.pending:  # it may hold executable nodes nobody reviewed: nothing installs it, an admin neither
        raise Conflict(f"release {release.release_id} is pending review; promote it before installing it")
    directory = await asyncio.to_thread(runtime_of(request).release_store.materialize, release)
    files = await asyncio.to_thread(lambda: render(load_tree(directory), chosen))
    script = install_script(
        chosen,
        files,
        release_id=release.release_id,
        scenario=scenario,
        base_url=state_of(request).settings.reef.public_base_url(),  # configured, never the request's Host header
        model=_served_model(request),
    )
    return ShellScript(script, headers={"x-reef-release-id": release.release_id})


@router.post(
    "/reef/harness/proposals", status_code=202, summary="Queue an agent's own proposal for the next evolution step"
)
async def propose(request: Request) -> Response:
    scenario = scenario_of(request)
    body = await json_object(request)
    runtime = runtime_of(request)
    if not runtime.recipe.surface.files:
        raise NotFound(f"the recipe {runtime.recipe.name!r} does not evolve a harness")
    if not runtime.known_scenario(scenario):
        if not state_of(request).settings.reef.implicit_scenarios:
            raise NotFound(f"unknown scenario {scenario!r} (implicit creation is off; POST /reef/scenarios first)")
        await runtime.ensure_scenario(scenario)
    against = body.get("release_id")
    if against is not None and not (isinstance(against, str) and re.fullmatch(RELEASE_ID_PATTERN, against)):
        raise BadRequest("must be a release id", field="release_id")
    store = runtime.release_store
    head = (
        await asyncio.to_thread(store.get, scenario, against)
        if against
        else await asyncio.to_thread(store.head, scenario)
    )
    if head is not None and head.pending and held_scope(request.scope) < Scope.ADMIN:
        raise Forbidden(f"release {against} is pending review; proposing against it needs {scope_words(Scope.ADMIN)}")
    directory = await asyncio.to_thread(store.materialize, head) if head is not None else None
    settings = state_of(request).settings
    # An agent token may touch only the kinds the operator allows (text nodes by default); an admin any kind.
    kinds = settings.harness.agent_proposal_kinds if held_scope(request.scope) < Scope.ADMIN else None
    mutations, reason = await asyncio.to_thread(check_proposal, body, directory, kinds)
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
