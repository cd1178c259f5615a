"""Health, status and metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

import reef

router = APIRouter(tags=["system"])


@router.get("/healthz", summary="Liveness (no auth)")
async def healthz() -> dict[str, Any]:
    return {"ok": True}


@router.get("/reef/status", summary="Per-scenario learner state")
async def status(request: Request) -> dict[str, Any]:
    return {"version": reef.__version__, **request.app.state.runtime.status()}


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    request.app.state.metrics.show_rollouts(request.app.state.runtime.rollout_views())
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
