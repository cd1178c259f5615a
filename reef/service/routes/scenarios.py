"""Scenarios, their records, releases and commit log."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, Response

from reef.core.errors import NotFound
from reef.core.scenarios import validate_scenario_name
from reef.service.deps import existing_scenario, live_scenario
from reef.service.schemas import ReleaseChoice, ScenarioCreate

router = APIRouter(tags=["scenarios"])


@router.get("/reef/scenarios", summary="List scenarios")
async def list_scenarios(request: Request) -> dict[str, Any]:
    infos = request.app.state.records.scenarios()
    return {
        "scenarios": [{"name": i.name, "recipe": i.recipe, "created_at": i.created_at} for i in infos],
    }


@router.post("/reef/scenarios", summary="Create a scenario (201) or confirm it exists (200)")
async def create_scenario(request: Request, body: ScenarioCreate) -> Response:
    info, created = await request.app.state.runtime.ensure_scenario(body.name, body.release_id)
    content = {"name": info.name, "recipe": info.recipe, "created_at": info.created_at, "created": created}
    return JSONResponse(content, status_code=201 if created else 200)


@router.delete("/reef/scenarios/{scenario}", summary="Archive a scenario and its state")
async def delete_scenario(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    await request.app.state.runtime.delete_scenario(scenario)
    return {"name": scenario, "archived": True}


@router.get("/reef/scenarios/{scenario}/records", summary="Page record metadata")
async def page_records(
    request: Request,
    scenario: str,
    after_sequence: int = Query(0, ge=0),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    records = request.app.state.records.page(scenario, after_sequence, limit)
    return {
        "records": [r.summary() for r in records],
        "next_after_sequence": records[-1].sequence if records else after_sequence,
    }


@router.get("/reef/scenarios/{scenario}/records/{agent_record_id}", summary="One record with its payload")
async def get_record(request: Request, scenario: str, agent_record_id: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    record = request.app.state.records.get(agent_record_id)
    if record is None or record.scenario != scenario:
        raise NotFound(f"no record {agent_record_id!r} in scenario {scenario!r}")
    return {**record.summary(), "payload": record.payload}


@router.post("/reef/scenarios/{scenario}/tasks", summary="Add gate tasks (a JSON body {tasks: [...]} or JSONL)")
async def add_tasks(request: Request, scenario: str) -> Response:
    await live_scenario(request.app.state, validate_scenario_name(scenario, field="scenario"))
    added = await request.app.state.runtime.add_tasks(scenario, await request.body())
    return JSONResponse(added, status_code=201)


@router.get("/reef/scenarios/{scenario}/tasks", summary="The gate tasks given through the API, and what the gate uses")
async def list_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return request.app.state.runtime.tasks(scenario)


@router.delete("/reef/scenarios/{scenario}/tasks", summary="Forget the gate tasks given through the API")
async def clear_tasks(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return await request.app.state.runtime.clear_tasks(scenario)


@router.get("/reef/scenarios/{scenario}/releases", summary="Releases, newest first")
async def list_releases(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return {"releases": request.app.state.runtime.releases(scenario)}


def _released(release: Any) -> Response:
    return JSONResponse(release.to_json(current=not release.pending), headers={"x-reef-release-id": release.release_id})


@router.post("/reef/scenarios/{scenario}/rollback", summary="Serve an earlier release again, as a new release")
async def rollback(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await request.app.state.runtime.rollback(scenario, body.release_id))


@router.post("/reef/scenarios/{scenario}/promote", summary="Serve a pending release, as a new release")
async def promote(request: Request, scenario: str, body: ReleaseChoice) -> Response:
    existing_scenario(request, scenario)
    return _released(await request.app.state.runtime.promote(scenario, body.release_id))


@router.get("/reef/scenarios/{scenario}/commits", summary="The learner's step log")
async def commits(
    request: Request,
    scenario: str,
    after_step: int = Query(-1, ge=-1),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return {"commits": request.app.state.runtime.commits(scenario, after_step, limit)}
