"""Scenarios, their records, releases and commit log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from reef.core.errors import NotFound
from reef.core.records import RequestType
from reef.core.scenarios import validate_scenario_name
from reef.service.deps import existing_scenario, live_scenario
from reef.service.schemas import ReleaseChoice, ScenarioCreate
from reef.service.state import runtime_of, state_of
from reef.storage.base import RecordStore

router = APIRouter(tags=["scenarios"])

# What a record or release id may look like in a query (the import routes' id rule).
_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
# Sequences and steps are 64-bit integers in the store: a larger cursor is a 400, not an overflow.
_MAX_SEQUENCE = 2**63 - 1
# An export page: at most this many records, ending early once their bodies reach this many bytes.
_EXPORT_PAGE_RECORDS = 500
_EXPORT_PAGE_BYTES = 8 * 1024 * 1024


@router.get("/reef/scenarios", summary="List scenarios")
async def list_scenarios(request: Request) -> dict[str, Any]:
    infos = state_of(request).records.scenarios()
    return {
        "scenarios": [{"name": i.name, "recipe": i.recipe, "created_at": i.created_at} for i in infos],
    }


@router.post("/reef/scenarios", summary="Create a scenario (201) or confirm it exists (200)")
async def create_scenario(request: Request, body: ScenarioCreate) -> Response:
    info, created = await runtime_of(request).ensure_scenario(body.name, body.release_id)
    content = {"name": info.name, "recipe": info.recipe, "created_at": info.created_at, "created": created}
    return JSONResponse(content, status_code=201 if created else 200)


@router.delete("/reef/scenarios/{scenario}", summary="Archive a scenario and its state")
async def delete_scenario(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    await runtime_of(request).delete_scenario(scenario)
    return {"name": scenario, "archived": True}


@router.get("/reef/scenarios/{scenario}/records", summary="Page record metadata")
async def page_records(
    request: Request,
    scenario: str,
    after_sequence: int = Query(0, ge=0, le=_MAX_SEQUENCE),
    limit: int = Query(100, ge=1, le=1000),
    request_type: RequestType | None = Query(None, description="only inferences or only reports"),
    release_id: str | None = Query(None, pattern=_ID_PATTERN, description="only inferences this release served"),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    # One more than asked says whether another record follows: the cursor is null exactly at the end.
    found = state_of(request).records.page(
        scenario, after_sequence, limit + 1, request_type=request_type, release_id=release_id
    )
    page = found[:limit]
    return {
        "records": [r.summary() for r in page],
        "next_after_sequence": page[-1].sequence if len(found) > limit else None,
    }


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
    store = state_of(request).records
    counts = await asyncio.to_thread(store.counts, scenario)
    headers = {
        "x-reef-export-records": str(counts.records - counts.evicted),
        "x-reef-export-evicted": str(counts.evicted),
        "x-reef-export-last-sequence": str(counts.last_sequence),
    }
    lines = _envelope_lines(store, scenario, counts.last_sequence)
    return StreamingResponse(lines, media_type="application/x-ndjson", headers=headers)


async def _envelope_lines(store: RecordStore, scenario: str, last_sequence: int) -> AsyncIterator[bytes]:
    """One JSONL chunk per page of the store, through `last_sequence`; one page in memory at a time."""
    cursor = 0
    while cursor < last_sequence:
        page = await asyncio.to_thread(
            store.page, scenario, cursor, _EXPORT_PAGE_RECORDS, max_body_bytes=_EXPORT_PAGE_BYTES
        )
        if not page:
            return
        chunk = b"".join(
            orjson.dumps({"agent_record_id": r.agent_record_id, "request_type": r.request_type, "payload": r.payload})
            + b"\n"
            for r in page
            if r.payload is not None and r.sequence is not None and r.sequence <= last_sequence
        )
        if chunk:
            yield chunk
        cursor = page[-1].sequence or last_sequence


@router.get("/reef/scenarios/{scenario}/records/{agent_record_id}", summary="One record with its payload")
async def get_record(request: Request, scenario: str, agent_record_id: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    store = state_of(request).records
    record = store.get(agent_record_id)
    if record is None or record.scenario != scenario:
        raise NotFound(f"no record {agent_record_id!r} in scenario {scenario!r}")
    found = {**record.summary(), "payload": record.payload}
    if record.request_type == "inference":
        found["cited_by"] = store.citing(scenario, agent_record_id)
    return found


@router.post("/reef/scenarios/{scenario}/tasks", summary="Add gate tasks (a JSON body {tasks: [...]} or JSONL)")
async def add_tasks(request: Request, scenario: str) -> Response:
    await live_scenario(state_of(request), validate_scenario_name(scenario, field="scenario"))
    added = await runtime_of(request).add_tasks(scenario, await request.body())
    return JSONResponse(added, status_code=201)


@router.get("/reef/scenarios/{scenario}/tasks", summary="The gate tasks given through the API, and what the gate uses")
async def list_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return runtime_of(request).tasks(scenario)


@router.delete("/reef/scenarios/{scenario}/tasks", summary="Forget the gate tasks given through the API")
async def clear_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return await runtime_of(request).clear_tasks(scenario)


@router.get("/reef/scenarios/{scenario}/releases", summary="Releases, newest first")
async def list_releases(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return {"releases": runtime_of(request).releases(scenario)}


def _released(release: Any) -> Response:
    return JSONResponse(release.to_json(current=not release.pending), headers={"x-reef-release-id": release.release_id})


@router.post("/reef/scenarios/{scenario}/rollback", summary="Serve an earlier release again, as a new release")
async def rollback(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await runtime_of(request).rollback(scenario, body.release_id))


@router.post("/reef/scenarios/{scenario}/promote", summary="Serve a pending release, as a new release")
async def promote(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await runtime_of(request).promote(scenario, body.release_id))


@router.get("/reef/scenarios/{scenario}/commits", summary="The learner's step log")
async def commits(
    request: Request,
    scenario: str,
    after_step: int = Query(-1, ge=-1, le=_MAX_SEQUENCE),
    limit: int = Query(100, ge=1, le=1000),
    record_id: str | None = Query(None, pattern=_ID_PATTERN, description="only the step(s) that consumed this record"),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return {"commits": runtime_of(request).commits(scenario, after_step, limit, record_id=record_id)}
