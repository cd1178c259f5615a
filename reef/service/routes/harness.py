"""The harness surface (docs/reference/http-api.md): the serving tree, its release chain, adapters, installer,
proposals."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from reef.core.errors import BadRequest, Forbidden
from reef.core.identifiers import RELEASE_ID_PATTERN
from reef.core.releases import Release
from reef.service.answers import as_json
from reef.service.deps import json_object, scenario_of
from reef.service.middleware import held_scope
from reef.service.scopes import Scope, scope_words
from reef.service.state import harness_of

router = APIRouter(tags=["harness"])


class ShellScript(PlainTextResponse):
    """A POSIX sh script (the installer), as the API document names its type."""

    media_type = "text/x-shellscript"


def _reviewer(request: Request) -> bool:
    """Whether the caller holds the admin scope: the reviewer of pending releases."""
    return held_scope(request.scope) >= Scope.ADMIN


async def _release(request: Request, scenario: str, release_id: str | None) -> Release:
    release = await harness_of(request).release(scenario, release_id)
    # A pending release may hold model-written code nobody reviewed yet: only an admin (the reviewer) sees it.
    if release_id and release.pending and not _reviewer(request):
        raise Forbidden(f"release {release_id} is pending review; reading it needs {scope_words(Scope.ADMIN)}")
    return release


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
    harness = harness_of(request)
    harness.require_harness(scenario)  # before the query's own checks: without a harness, nothing to ask
    if release_id and version and release_id != version:
        raise BadRequest("give release_id or version, not two different ones", field="version")
    adapter = harness.adapter(adapter or None)
    release = await _release(request, scenario, release_id or version)
    view = await harness.view(release, adapter)
    return JSONResponse(view, headers={"x-reef-release-id": release.release_id})


@router.get("/reef/harness/releases", summary="The scenario's harness releases, oldest first")
async def list_releases(request: Request) -> dict[str, Any]:
    scenario = scenario_of(request)
    return {"scenario": scenario, "releases": await harness_of(request).releases(scenario, _reviewer(request))}


@router.get("/reef/harness/versions", summary="The same rows as `versions` (the reference client reads this)")
async def list_versions(request: Request) -> dict[str, Any]:
    scenario = scenario_of(request)
    return {"scenario": scenario, "versions": await harness_of(request).releases(scenario, _reviewer(request))}


@router.get("/reef/harness/adapters", summary="The adapters a harness renders for")
async def list_adapters(request: Request) -> dict[str, Any]:
    return as_json(harness_of(request).adapters())


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
    harness = harness_of(request)
    adapter = harness.adapter(adapter)
    release = await _release(request, scenario, release_id)
    installer = await harness.installer(scenario, release, adapter)
    return ShellScript(installer.script, headers={"x-reef-release-id": installer.release_id})


@router.post(
    "/reef/harness/proposals", status_code=202, summary="Queue an agent's own proposal for the next evolution step"
)
async def propose(request: Request) -> Response:
    scenario = scenario_of(request)
    body = await json_object(request)
    harness = harness_of(request)
    against = body.get("release_id")
    base = await harness.proposal_base(scenario, against)
    if base.pending and not _reviewer(request):
        raise Forbidden(f"release {against} is pending review; proposing against it needs {scope_words(Scope.ADMIN)}")
    # An agent token may touch only the kinds the operator allows (text nodes by default); an admin any kind.
    queued = await harness.propose(scenario, base, body, reviewer=_reviewer(request))
    return JSONResponse(queued, status_code=202)
