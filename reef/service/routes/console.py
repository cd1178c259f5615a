"""The operator's web console at `/console`, served from the wheel."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["console"])
