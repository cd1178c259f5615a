"""Training control: a scenario's contract, its training mode, and asking for a learner step now."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["training"])
