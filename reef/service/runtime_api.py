"""What the HTTP edge calls on the application layer, one Protocol per route group, owned by the service.

`RuntimeAPI` is all of them together (the records and the harness surface as its parts `recording` and
`harness`): `reef.application.runtime.Runtime` implements it, the composition root
passes one to `create_app` (mypy checks it there), and a test may pass anything else that satisfies it. Routes
reach each group through its accessor in `reef.service.state`. Answers are typed (`reef.core.views`, or the
domain values themselves); the routes serialise them as the HTTP API reference shows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from reef.core.records import Record, RequestType
from reef.core.releases import Commit, Release
from reef.core.views import (
    AdaptersView,
    ArchiveView,
    ContractView,
    ControlView,
    GateTasksAdded,
    GateTasksCleared,
    GateTasksView,
    HarnessView,
    ImportItem,
    Installer,
    JSONObject,
    NextStepView,
    ProposalQueued,
    Receipt,
    RecordPage,
    RecordView,
    ReleaseRow,
    RolloutView,
    ScenarioView,
    StatusView,
    StepQueued,
)
from reef.inference.base import RequestContext
from reef.storage.base import RecordCounts, ScenarioInfo


class RecordsAPI(Protocol):
    """A scenario's records: reports and imports stored, pages and single records read back, the export."""

    async def check_references(self, scenario: str, references: Sequence[str]) -> None:
        """BadRequest naming the first receipt that is not an inference record of `scenario`."""

    async def store_report(self, scenario: str, payload: dict[str, Any], agent_record_id: str | None) -> Receipt:
        """Store a validated report durably and wake the scenario's learner."""

    def imports(self, scenario: str, items: Sequence[ImportItem]) -> list[Record]:
        """The records of an import, checked before anything is stored (BadRequest naming a bad item's field)."""

    async def store_imports(self, records: Sequence[Record]) -> list[Receipt]:
        """Store an import's records atomically and wake the learner."""

    async def remember_inference(self, record: Record) -> None:
        """Make an inference record durable."""

    async def scenario_views(self) -> list[ScenarioView]:
        """Every live scenario."""

    async def page(
        self,
        scenario: str,
        after_sequence: int,
        limit: int,
        request_type: RequestType | None = None,
        release_id: str | None = None,
    ) -> RecordPage:
        """Record metadata after `after_sequence`, at most `limit` records."""

    async def record(self, scenario: str, agent_record_id: str) -> RecordView:
        """One record with its payload; NotFound if absent."""

    async def export_counts(self, scenario: str) -> RecordCounts:
        """How many records an export starting now covers, and how many retention evicted."""

    def envelope_lines(self, scenario: str, last_sequence: int) -> AsyncIterator[bytes]:
        """The export's JSONL chunks through `last_sequence`."""


class ScenariosAPI(Protocol):
    """Scenarios: created, confirmed, deleted; their records; new records wake their learner."""

    @property
    def recording(self) -> RecordsAPI:
        """The scenarios' records."""

    def known_scenario(self, name: str) -> bool:
        """Whether `name` is a live scenario with a serving release (in memory; the hot path)."""

    async def ensure_scenario(self, name: str, release_id: str | None = None) -> tuple[ScenarioInfo, bool]:
        """Create the scenario if absent; `(info, created)`."""

    async def delete_scenario(self, name: str) -> None:
        """Archive the scenario's records and release refs and stop its learner; NotFound if unknown."""

    def validate_report(self, scenario: str, report: dict[str, Any]) -> None:
        """Check a report's fields the recipe reads; BadRequest naming a malformed one (a report lacking what the
        recipe trains from passes)."""

    def notify(self, scenario: str) -> None:
        """Records of `scenario` were appended: wake its learner (never blocks)."""


class ServingAPI(Protocol):
    """The `/v1` hot path: which release serves a request, and what it cost."""

    def context_for(self, scenario: str, release_id: str | None) -> RequestContext:
        """The request context: the serving release, or a pinned one (NotFound if it is not the scenario's)."""

    def route(self, scenario: str, release_id: str | None, tags: dict[str, str]) -> tuple[RequestContext, str | None]:
        """A request's context (a pinned release, an open rollout's arm, else the serving release) and the id of the
        rollout that chose it (None when none did)."""

    async def route_request(
        self, scenario: str, release_id: str | None, tags: dict[str, str]
    ) -> tuple[RequestContext, str | None]:
        """`route`, never blocking the event loop: a pinned release is looked up in a worker thread (and cached)."""

    def pinned_pending(self, scenario: str, release_id: str) -> bool:
        """Whether a pin a request was routed with names a pending release (from memory)."""

    async def request_failed(self, scenario: str, rollout_id: str, ctx: RequestContext) -> None:
        """A request a rollout routed failed (5xx, timeout): it counts against its arm."""

    def count_learner_usage(self, scenario: str, usage: dict[str, Any] | None) -> None:
        """Count what one of the learner's own requests that came over `/v1` spent upstream."""


class ReleasesAPI(Protocol):
    """A scenario's releases and its learner's step log."""

    def releases(self, scenario: str) -> list[ReleaseRow]:
        """Every release of `scenario`, newest first, marking the serving one `current` (reads git: call it from a
        worker thread)."""

    async def release(self, scenario: str, release_id: str | None) -> Release:
        """A release of `scenario`, or its serving one when None; NotFound if there is none."""

    async def materialize(self, release: Release) -> Path:
        """The directory holding the release's content."""

    async def rollback(self, scenario: str, release_id: str) -> Release:
        """Serve an earlier release again, as a new release."""

    async def promote(self, scenario: str, release_id: str) -> Release:
        """Serve a pending (reviewed) release, as a new release."""

    def commits(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[Commit]:
        """The learner's step log of `scenario`, ascending from `after_step` (reads the commit log: call it from a
        worker thread)."""


class TrainingAPI(Protocol):
    """How a scenario trains: its contract, its control, requested steps, its gate tasks, the deployment's status."""

    def contract(self, scenario: str) -> ContractView:
        """What a client needs to feed the scenario: recipe, report schema, training control and readiness."""

    async def update_control(
        self,
        scenario: str,
        training_mode: str | None = None,
        paused: bool | None = None,
        rollout_mode: str | None = None,
    ) -> ControlView:
        """Set the scenario's training mode, pause or resume its learning, and/or set its rollout mode."""

    async def request_step(self, scenario: str, text: str | None = None, release_id: str | None = None) -> StepQueued:
        """Queue a learner step of `scenario` now."""

    def tasks(self, scenario: str) -> GateTasksView:
        """The API-given gate tasks of `scenario` and what its gate uses now."""

    async def add_tasks(self, scenario: str, body: bytes) -> GateTasksAdded:
        """Validate and store gate tasks given as a request body; nothing is stored on a bad one."""

    async def clear_tasks(self, scenario: str) -> GateTasksCleared:
        """Forget the API-given gate tasks of `scenario`."""

    def status(self) -> StatusView:
        """Per scenario: learner step, buffered units, job state, last verdict, serving release, errors."""


class RolloutAPI(Protocol):
    """A scenario's canary rollout."""

    def rollout(self, scenario: str) -> RolloutView:
        """The scenario's open or last rollout (`state` `none` when it never had one; reads the record store: call
        it from a worker thread)."""

    def rollout_views(self) -> dict[str, RolloutView]:
        """Every live scenario's open or last rollout, for the metrics (reads the record store: call it from a
        worker thread)."""

    async def end_rollout(self, scenario: str, action: str) -> RolloutView:
        """Promote or roll back the scenario's open rollout now; Conflict when none is open."""


class HarnessAPI(Protocol):
    """The harness surface: a release's files for an adapter, the harness releases, the installer, proposals. The
    route checks who may read a pending release or propose against one; `reviewer` says the caller is an admin."""

    def require_harness(self, scenario: str | None = None) -> None:
        """NotFound unless the recipe evolves a harness (and, given one, `scenario` is live)."""

    def adapter(self, name: str | None = None) -> str:
        """The adapter `name` (None: the configured default); BadRequest naming `adapter` if there is none."""

    async def release(self, scenario: str, release_id: str | None) -> Release:
        """The given (else the serving) release of a scenario with a harness; NotFound if there is none."""

    async def view(self, release: Release, adapter: str) -> HarnessView:
        """The release's files rendered for `adapter`, with its stored tree and files."""

    async def releases(self, scenario: str, reviewer: bool) -> list[JSONObject]:
        """The scenario's harness releases, oldest first; pending ones (but an open rollout's candidate) only for the
        reviewer."""

    def adapters(self) -> AdaptersView:
        """Every adapter shipped with Reef."""

    async def installer(self, scenario: str, release: Release, adapter: str) -> Installer:
        """The installer of the release's harness for `adapter`; Conflict for a pending release."""

    async def proposal_base(self, scenario: str, release_id: object) -> Release:
        """The release a proposal is checked against (the one named, else the serving one); creates the scenario
        when implicit creation is on."""

    async def propose(self, scenario: str, base: Release, body: dict[str, Any], reviewer: bool) -> ProposalQueued:
        """Check a proposal against `base` and queue it for the next evolution step; BadRequest or Forbidden naming
        what is wrong with it."""


class SearchAPI(Protocol):
    """The search archive of a discovery scenario."""

    async def archive(self, scenario: str, limit: int) -> ArchiveView:
        """The search archive the serving release carries; BadRequest when the recipe does not search."""

    async def archive_next(self, scenario: str, groups: int) -> NextStepView:
        """The next search step's `groups` parents and prompts."""


class RuntimeAPI(ScenariosAPI, ServingAPI, ReleasesAPI, TrainingAPI, RolloutAPI, SearchAPI, Protocol):
    """The domain facade the routes call: every route group, and the lifecycle the app's lifespan drives."""

    @property
    def harness(self) -> HarnessAPI:
        """The harness surface."""

    async def start(self) -> None:
        """Serve each live scenario's head release, then start its learner."""

    async def stop(self) -> None:
        """Stop every learner and give up its locks."""
