"""Health, status and metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

import reef
from reef.service.state import runtime_of, state_of

router = APIRouter(tags=["system"])


@router.get("/healthz", summary="Liveness (no auth)")
async def healthz() -> dict[str, Any]:
    return {"ok": True}


@router.get("/reef/status", summary="Per-scenario learner state")
async def status(request: Request) -> dict[str, Any]:
    return {"version": reef.__version__, **runtime_of(request).status()}


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    state = state_of(request)
    state.metrics.show_rollouts(state.runtime.rollout_views())
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
