"""Health, status and metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

import reef
from reef.service.middleware import held_scope
from reef.service.scopes import Scope
from reef.service.state import state_of, training_of

router = APIRouter(tags=["system"])


@router.get("/healthz", summary="Liveness (no auth)")
async def healthz() -> dict[str, Any]:
    return {"ok": True}


@router.get("/reef/status", summary="Per-scenario learner state")
async def status(request: Request) -> dict[str, Any]:
    found: dict[str, Any] = {"version": reef.__version__, **training_of(request).status()}
    if held_scope(request.scope) < Scope.ADMIN:
        for entry in found["scenarios"].values():
            _as_an_agent_sees(entry)
    return found


def _as_an_agent_sees(entry: dict[str, Any]) -> None:
    """Leave out of a scenario's status what only the reviewer sees: the operator's instruction for a requested
    step, and which release is pending review."""
    requested = entry.get("requested")
    if isinstance(requested, dict):
        entry["requested"] = {key: value for key, value in requested.items() if key not in ("text", "release_id")}
    last = entry.get("last_commit")
    if isinstance(last, dict) and last.get("verdict") == "pending":
        entry["last_commit"] = {**last, "release_id": None}


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    state = state_of(request)
    state.metrics.show_rollouts(await asyncio.to_thread(state.runtime.rollout_views))  # a database read
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
