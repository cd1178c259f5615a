"""What the runtime answers the HTTP edge with: one type per answer, as the API serialises it.

Most are TypedDicts, as `payloads` are: each goes out as JSON exactly as it is built. A release row wraps the
release value and says how the routes show it; the installer is a script, not JSON. The reference page of the HTTP
API names their fields.
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


class ContractView(TypedDict):
    """`GET /reef/scenarios/{s}/contract`: the recipe, its report schema, the training control and what is ready."""

    scenario: str
    recipe: str
    surface: str
    learns: bool
    report_schema: dict[str, Any]
    training_mode: str | None
    paused: bool
    requested: dict[str, Any] | None
    batch_size: int
    ready: int
    gate: dict[str, Any] | None


class LearningStatus(TypedDict):
    """The deployment's learning settings, as `GET /reef/status` shows them."""

    mode: str
    enabled: bool
    batch_size: int
    review: bool


class EvaluationStatus(TypedDict):
    """The deployment's gate settings, as `GET /reef/status` shows them."""

    policy: str
    tasks: str | None
    holdout_every: int
    holdout_min_tasks: int
    retention_items: int
    max_regression: float


class StatusView(TypedDict):
    """`GET /reef/status` (less `version`): the deployment, and per live scenario its serving release, its learner's
    state and who leads it."""

    replica_id: str
    recipe: str
    surface: str
    learning: LearningStatus
    evaluation: EvaluationStatus
    scenarios: dict[str, dict[str, Any]]


class RolloutStatistics(TypedDict):
    """A rollout's evidence: each arm's counts and interval, and the difference between the arms."""

    arms: dict[str, dict[str, Any]]
    difference: dict[str, Any]
    alpha: NotRequired[float]


class RolloutView(RolloutStatistics):
    """`GET /reef/scenarios/{s}/rollout`: the open or last rollout (`state` `none`, with empty arms, when the scenario
    never had one)."""

    state: str
    rollout_id: str | None
    candidate_release_id: str | None
    incumbent_release_id: str | None
    share: float | None
    decision: str | None
    decided_by: NotRequired[str | None]
    reason: str | None
    started_at: NotRequired[float]
    ended_at: NotRequired[float | None]
    release_id: NotRequired[str | None]


class ArchiveView(TypedDict):
    """`GET /reef/scenarios/{s}/archive`: the problem, the last step and the top entries of the search archive."""

    problem: str
    direction: str
    step: int
    total_visits: int
    size: int
    best_known: float | None
    best_known_source: str | None
    entries: list[dict[str, Any]]


class NextStepView(TypedDict):
    """`GET /reef/scenarios/{s}/archive/next`: the next search step's parents, each with its prompt."""

    problem: str
    step: int
    answer: str
    response_format: dict[str, Any] | None
    parents: list[dict[str, Any]]
    rollouts: NotRequired[int]
    mode: NotRequired[str]
    guide_response_format: NotRequired[dict[str, Any]]


class HarnessView(TypedDict):
    """`GET /reef/harness`: a release's harness files rendered for an adapter, its stored tree and files, its
    evaluation, and what the adapter requires (`artifact_version` is the reference client's name for the release
    id)."""

    release_id: str
    artifact_version: str
    parent_release_id: str | None
    content_id: str
    step: int
    operation: str
    adapter: str
    files: dict[str, str]
    tree: dict[str, Any]
    stored_files: dict[str, str]
    evaluation: dict[str, Any]
    requires: dict[str, Any]


class AdaptersView(TypedDict):
    """`GET /reef/harness/adapters`: every adapter a harness renders for."""

    adapters: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class Installer:
    """`GET /reef/harness/install`: the POSIX sh script that installs a release's harness for one adapter."""

    release_id: str
    script: str


JSONObject = dict[str, Any]  # a row whose shape its producer documents (a release row, a record payload)
