"""Training control: a scenario's contract, its training mode, and asking for a learner step now."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from reef.core.errors import BadRequest
from reef.service.answers import as_json
from reef.service.deps import existing_scenario, scenario_of
from reef.service.schemas import RolloutAction, ScenarioUpdate, TrainRequest
from reef.service.state import rollout_of, training_of

router = APIRouter(tags=["training"])


@router.get("/reef/scenarios/{scenario}/contract", summary="What the scenario's recipe needs and how it trains")
async def contract(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(training_of(request).contract(scenario))


@router.post(
    "/reef/scenarios/{scenario}/update", summary="Set the training mode or rollout mode, or pause / resume learning"
)
async def update(request: Request, scenario: str, body: ScenarioUpdate) -> dict[str, Any]:
    existing_scenario(request, scenario)
    if body.training_mode is None and body.paused is None and body.rollout_mode is None:
        raise BadRequest("give training_mode, paused and/or rollout_mode", field="body")
    return as_json(
        await training_of(request).update_control(scenario, body.training_mode, body.paused, body.rollout_mode)
    )


@router.get("/reef/scenarios/{scenario}/rollout", summary="The scenario's open or last rollout and its evidence")
async def rollout(request: Request, scenario: str) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await asyncio.to_thread(rollout_of(request).rollout, scenario))  # a database read: off the loop


@router.post("/reef/scenarios/{scenario}/rollout", summary="Promote or roll back the open rollout now")
async def end_rollout(request: Request, scenario: str, body: RolloutAction) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await rollout_of(request).end_rollout(scenario, body.action))


@router.post("/reef/train", status_code=202, summary="Queue a learner step now (202 with its step id)")
async def train(request: Request, body: TrainRequest | None = None) -> Response:
    scenario = scenario_of(request)
    existing_scenario(request, scenario)
    body = body or TrainRequest()
    queued = await training_of(request).request_step(scenario, body.text, body.release_id)
    return JSONResponse(queued, status_code=202)
