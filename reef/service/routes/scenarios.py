"""Scenarios, their records, releases and commit log."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from reef.core.identifiers import RECORD_ID_PATTERN, RELEASE_ID_PATTERN
from reef.core.records import RequestType
from reef.core.releases import Release
from reef.core.scenarios import validate_scenario_name
from reef.core.views import ScenarioCreated
from reef.service.answers import as_json
from reef.service.deps import existing_scenario, live_scenario
from reef.service.schemas import ReleaseChoice, ScenarioCreate
from reef.service.state import records_of, releases_of, scenarios_of, state_of, training_of

router = APIRouter(tags=["scenarios"])

# Sequences and steps are 64-bit integers in the store: a larger cursor is a 400, not an overflow.
_MAX_SEQUENCE = 2**63 - 1


@router.get("/reef/scenarios", summary="List scenarios")
async def list_scenarios(request: Request) -> dict[str, Any]:
    return {"scenarios": await records_of(request).scenario_views()}


@router.post(
    "/reef/scenarios",
    summary="Create a scenario (201) or confirm it exists (200)",
    status_code=201,
    responses={200: {"description": "The scenario already existed"}},
)
async def create_scenario(request: Request, body: ScenarioCreate) -> Response:
    info, created = await scenarios_of(request).ensure_scenario(body.name, body.release_id)
    content: ScenarioCreated = {
        "name": info.name,
        "recipe": info.recipe,
        "created_at": info.created_at,
        "created": created,
    }
    return JSONResponse(content, status_code=201 if created else 200)


@router.delete("/reef/scenarios/{scenario}", summary="Archive a scenario and its state")
async def delete_scenario(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    await scenarios_of(request).delete_scenario(scenario)
    return {"name": scenario, "archived": True}


@router.get("/reef/scenarios/{scenario}/records", summary="Page record metadata")
async def page_records(
    request: Request,
    scenario: str,
    after_sequence: int = Query(0, ge=0, le=_MAX_SEQUENCE),
    limit: int = Query(100, ge=1, le=1000),
    request_type: RequestType | None = Query(None, description="only inferences or only reports"),
    release_id: str | None = Query(None, pattern=RELEASE_ID_PATTERN, description="only inferences this release served"),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await records_of(request).page(scenario, after_sequence, limit, request_type, release_id))


@router.get(
    "/reef/scenarios/{scenario}/records/export",
    summary="Every record of the scenario as JSONL envelopes",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}, "description": "one envelope per line"}},
)
async def export_records(request: Request, scenario: str) -> Response:
    """Streams `{agent_record_id, request_type, payload}` lines in sequence order, as `reef-client import` reads them.

    The export covers the records stored when it starts. A record whose body retention evicted is left out (it
    cannot be imported again faithfully: its hash would change): `x-reef-export-evicted` says how many were, and
    `x-reef-export-records` how many lines follow, so a shorter file (cut off, or evicted during the export) shows.
    """
    existing_scenario(request, scenario)
    records = records_of(request)
    counts = await records.export_counts(scenario)
    headers = {
        "x-reef-export-records": str(counts.records - counts.evicted),
        "x-reef-export-evicted": str(counts.evicted),
        "x-reef-export-last-sequence": str(counts.last_sequence),
    }
    lines = records.envelope_lines(scenario, counts.last_sequence)
    return StreamingResponse(lines, media_type="application/x-ndjson", headers=headers)


@router.get("/reef/scenarios/{scenario}/records/{agent_record_id}", summary="One record with its payload")
async def get_record(
    request: Request, scenario: str, agent_record_id: str = Path(..., pattern=RECORD_ID_PATTERN)
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await records_of(request).record(scenario, agent_record_id))


@router.post(
    "/reef/scenarios/{scenario}/tasks", status_code=201, summary="Add gate tasks (a JSON body {tasks: [...]} or JSONL)"
)
async def add_tasks(request: Request, scenario: str) -> Response:
    await live_scenario(state_of(request), validate_scenario_name(scenario, field="scenario"))
    added = await training_of(request).add_tasks(scenario, await request.body())
    return JSONResponse(added, status_code=201)


@router.get("/reef/scenarios/{scenario}/tasks", summary="The gate tasks given through the API, and what the gate uses")
async def list_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(training_of(request).tasks(scenario))


@router.delete("/reef/scenarios/{scenario}/tasks", summary="Forget the gate tasks given through the API")
async def clear_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await training_of(request).clear_tasks(scenario))


@router.get("/reef/scenarios/{scenario}/releases", summary="Releases, newest first")
async def list_releases(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    rows = await asyncio.to_thread(releases_of(request).releases, scenario)  # git: off the event loop
    return {"releases": [row.to_json() for row in rows]}


def _released(release: Release) -> Response:
    return JSONResponse(release.to_json(current=not release.pending), headers={"x-reef-release-id": release.release_id})


@router.post("/reef/scenarios/{scenario}/rollback", summary="Serve an earlier release again, as a new release")
async def rollback(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await releases_of(request).rollback(scenario, body.release_id))


@router.post("/reef/scenarios/{scenario}/promote", summary="Serve a pending release, as a new release")
async def promote(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await releases_of(request).promote(scenario, body.release_id))


@router.get("/reef/scenarios/{scenario}/commits", summary="The learner's step log")
async def commits(
    request: Request,
    scenario: str,
    after_step: int = Query(-1, ge=-1, le=_MAX_SEQUENCE),
    limit: int = Query(100, ge=1, le=1000),
    record_id: str | None = Query(
        None, pattern=RECORD_ID_PATTERN, description="only the step(s) that consumed this record"
    ),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    # The commit log may be a database table: read it off the event loop.
    found = await asyncio.to_thread(releases_of(request).commits, scenario, after_step, limit, record_id=record_id)
    return {"commits": [commit.to_json() for commit in found]}
