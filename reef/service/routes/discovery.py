"""The search archive of a discovery scenario (recipes `tttd`, `tttd-mean`): its top entries and the next step."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from reef.service.answers import as_json
from reef.service.deps import existing_scenario
from reef.service.state import search_of

router = APIRouter(tags=["discovery"])


@router.get("/reef/scenarios/{scenario}/archive", summary="The search archive's top entries")
async def archive(request: Request, scenario: str, limit: int = Query(20, ge=1, le=1000)) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await search_of(request).archive(scenario, limit))


@router.get("/reef/scenarios/{scenario}/archive/next", summary="The next search step's parents and prompts")
async def archive_next(request: Request, scenario: str, groups: int = Query(..., ge=1, le=64)) -> dict[str, Any]:
    existing_scenario(request, scenario)
    return as_json(await search_of(request).archive_next(scenario, groups))
