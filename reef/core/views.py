"""What the runtime answers the HTTP edge with: one type per answer, as the API serialises it.

Most are TypedDicts, as `payloads` are: each goes out as JSON exactly as it is built. A release row wraps the
release value and says how the routes show it. The reference page of the HTTP API names their fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NotRequired, TypedDict

from reef.core.records import RequestType
from reef.core.releases import Release

ImportItem = tuple[RequestType, dict[str, Any], str | None, str]  # request_type, payload, agent_record_id, field


class ScenarioView(TypedDict):
    """A scenario in `GET /reef/scenarios`."""

    name: str
    recipe: str
    created_at: float


class ScenarioCreated(ScenarioView):
    """`POST /reef/scenarios`: the scenario, and whether this call created it."""

    created: bool


class RecordSummary(TypedDict):
    """A record's metadata without its payload (`Record.summary`)."""

    agent_record_id: str
    scenario: str
    request_type: str
    sequence: int | None
    created_at: float
    references: list[str] | None
    score: float | None
    release_id: str | None
    content_hash: str
    consumed_step: int | None
    evicted: bool


class RecordView(RecordSummary):
    """One record with its payload; an inference also lists the reports that cite it."""

    payload: dict[str, Any] | None
    cited_by: NotRequired[list[str]]


class RecordPage(TypedDict):
    """A page of record metadata; `next_after_sequence` is null exactly at the end."""

    records: list[RecordSummary]
    next_after_sequence: int | None


class Receipt(TypedDict):
    """What storing a report or importing a record acknowledges."""

    agent_record_id: str
    request_type: str
    scenario: str


@dataclasses.dataclass(frozen=True, slots=True)
class ReleaseRow:
    """A release as the release routes list it: marked `current` when it serves, `canary` when an open rollout
    tries it."""

    release: Release
    current: bool
    canary: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.release.to_json(current=self.current), "canary": self.canary}


class GateTasksView(TypedDict):
    """The API-given gate tasks of a scenario and what its gate uses now."""

    tasks: list[dict[str, Any]]
    gate: dict[str, object]


class GateTasksAdded(GateTasksView):
    """Gate tasks stored by `POST /reef/scenarios/{s}/tasks`: how many, and which."""

    added: int


class GateTasksCleared(TypedDict):
    """`DELETE /reef/scenarios/{s}/tasks`: how many were forgotten."""

    removed: int
    gate: dict[str, object]


class ControlView(TypedDict):
    """A scenario's training control and rollout mode, as set by `POST /reef/scenarios/{s}/update`."""

    scenario: str
    training_mode: str
    paused: bool
    requested: dict[str, Any] | None
    rollout_mode: str | None


class StepQueued(TypedDict):
    """A requested learner step, queued (`POST /reef/train`)."""

    step_id: str
    text: str | None
    release_id: str | None
    requested_at: float
    scenario: str
    state: str


class ProposalQueued(TypedDict):
    """An agent's harness proposal, queued for the next evolution step."""

    proposal_id: str
    scenario: str
    queued: bool


JSONObject = dict[str, Any]  # an answer whose shape its producer documents (status, contract, rollout, archive)
