"""A scenario's training control: its mode, whether learning is paused, and the one step an operator asked for.

`auto` steps whenever a full batch is ready, `manual` only on request (POST /reef/train), `hybrid` both; `paused`
starts no step at all. Every change is stored with the scenario (`RecordStore.set_control`) before it takes
effect, so a restart keeps the mode, the pause and a request that had not committed yet.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from reef.core.errors import BadRequest, Conflict
from reef.core.payloads import ControlState
from reef.core.views import ContractView
from reef.learning.base import Recipe
from reef.storage.base import RecordStore, ScenarioControl

TRAINING_MODES = ("auto", "manual", "hybrid")


class TrainingControl:
    """The training mode, pause and requested step of one scenario, as stored."""

    def __init__(self, scenario: str, records: RecordStore, default_mode: str) -> None:
        self.scenario = scenario
        self.records = records
        self.mode = default_mode
        self.paused = False
        self.request: dict[str, Any] | None = None  # a requested step, queued or running
        self.lock = asyncio.Lock()  # held while a request is checked and queued, and around every change

    def resume(self, committed: Callable[[str], bool]) -> None:
        """Read what was stored; a request whose step `committed` (the server stopped before forgetting it) is
        forgotten now."""
        stored = self.records.control(self.scenario)
        self.mode = stored.training_mode or self.mode
        self.paused = stored.paused
        self.request = stored.request
        if self.request is not None and committed(self.request["step_id"]):
            self.request = None
            self._store(self.mode, self.paused, None)

    def state(self, running_step_id: str | None) -> ControlState:
        """`training_mode`, `paused` and `requested` (with `state` queued or running) as the API shows them."""
        requested = None
        if self.request is not None:
            running = running_step_id == self.request["step_id"]
            requested = {**self.request, "state": "running" if running else "queued"}
        return {"training_mode": self.mode, "paused": self.paused, "requested": requested}

    async def set(self, training_mode: str | None, paused: bool | None) -> None:
        """Change the mode and/or the pause (stored first, then in effect)."""
        if training_mode is not None and training_mode not in TRAINING_MODES:
            raise BadRequest(f"must be one of {', '.join(TRAINING_MODES)}", field="training_mode")
        async with self.lock:
            mode = training_mode if training_mode is not None else self.mode
            now_paused = paused if paused is not None else self.paused
            await asyncio.to_thread(self._store, mode, now_paused, self.request)
            self.mode, self.paused = mode, now_paused

    def check_requestable(self) -> None:
        """Conflict unless a step may be requested now: not paused, not `auto`, none queued or running."""
        if self.paused:
            raise Conflict(f"learning of scenario {self.scenario!r} is paused; resume it first")
        if self.mode == "auto":
            raise Conflict(
                f"scenario {self.scenario!r} has training_mode auto, which steps only on full batches; "
                "set training_mode to manual or hybrid to ask for steps"
            )
        if self.request is not None:
            raise Conflict(f"step {self.request['step_id']} was requested already and has not committed")

    async def queue(self, text: str | None, release_id: str | None) -> dict[str, Any]:
        """Store a new request and make it the pending one (the caller holds `lock` and checked it first)."""
        request = {
            "step_id": f"stp_{uuid.uuid4().hex[:16]}",
            "text": text,
            "release_id": release_id,
            "requested_at": time.time(),
        }
        await asyncio.to_thread(self._store, self.mode, self.paused, request)
        self.request = request
        return request

    async def forget(self) -> None:
        """The requested step ended (committed or declined): forget it, stored first."""
        async with self.lock:
            await asyncio.to_thread(self._store, self.mode, self.paused, None)
            self.request = None

    def _store(self, mode: str, paused: bool, request: dict[str, Any] | None) -> None:
        self.records.set_control(self.scenario, ScenarioControl(mode, paused, request))


def contract(scenario: str, recipe: Recipe, batch_size: int, state: Mapping[str, Any] | None) -> ContractView:
    """`GET /reef/scenarios/{s}/contract`: the recipe, its report schema, and (from the learner's `state`, None when
    the recipe does not learn) the training control and what is ready."""
    state = state or {}
    return {
        "scenario": scenario,
        "recipe": recipe.name,
        "surface": recipe.surface.name,
        "learns": bool(state),
        "report_schema": recipe.report_model.json_schema(recipe),
        "training_mode": state.get("training_mode"),
        "paused": state.get("paused", False),
        "requested": state.get("requested"),
        "batch_size": batch_size,
        "ready": state.get("ready", 0),
        "gate": state.get("gate"),
    }
