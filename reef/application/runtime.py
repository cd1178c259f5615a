"""The domain facade the HTTP service calls: scenarios, releases, request contexts, learners and status.

Sync methods are on the hot path and answer from memory; async methods touch git or the engine and push
blocking store calls to worker threads so the event loop keeps serving. Each scenario's life (creation, its
learner, what other replicas publish, deletion) is `scenarios`; what its requests are served with is `serving`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.application.harness_surface import HarnessSurface
from reef.application.recording import Recording
from reef.application.release_history import ReleaseHistory
from reef.application.rollout import Rollouts, check_rollout
from reef.application.scenarios import Scenarios
from reef.application.search import serving_search
from reef.application.serving import ServingContexts, release_dir
from reef.application.status import deployment_status
from reef.coordination.election import Election, SoleElection
from reef.coordination.hints import NoHints, ReleaseHints
from reef.core.errors import Conflict, NotFound
from reef.core.releases import Commit, Release
from reef.core.settings import Settings
from reef.core.views import (
    ArchiveView,
    ContractView,
    ControlView,
    GateTasksAdded,
    GateTasksCleared,
    GateTasksView,
    NextStepView,
    ReleaseRow,
    RolloutView,
    StatusView,
    StepQueued,
)
from reef.inference.base import Engine, RequestContext
from reef.learning.base import Evaluator, Recipe, Selector, TrainingBackend
from reef.learning.budget import MeteredEngine, UpstreamBudget, usage_tokens
from reef.learning.control import contract
from reef.learning.evaluation.defaults import default_evaluator, default_selector
from reef.learning.evaluation.task_origin import refuse_code_from_traffic
from reef.learning.evaluation.task_store import parse_tasks_body
from reef.learning.evaluation.tasks import GateTasks
from reef.learning.gate import GateSources
from reef.learning.growth import default_backend_factory
from reef.learning.learner import Learner
from reef.learning.report import parse_report
from reef.learning.services import LearningServices
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore, ScenarioInfo

log = logging.getLogger(__name__)


class Runtime:
    """Owns every scenario's serving state and learner; the only writer of releases in this process."""

    def __init__(
        self,
        settings: Settings,
        records: RecordStore,
        releases: ReleaseStore,
        commits: CommitLog,
        engine: Engine,
        *,
        recipe: Recipe | None = None,
        evaluator: Evaluator | None = None,
        selector: Selector | None = None,
        backend_factory: Callable[[], TrainingBackend] | None = None,
        election: Election | None = None,
        hints: ReleaseHints | None = None,
        budget: UpstreamBudget | None = None,
    ) -> None:
        self.settings = settings
        self.budget = budget or UpstreamBudget(settings.learning.max_upstream_tokens_per_hour)
        # The learner's own model calls (gate generations, proposer, judge) count against the budget.
        learner_engine = MeteredEngine(engine, self.budget) if self.budget.max_tokens_per_hour else engine
        self.records = records
        self.release_store = releases
        self.commit_log = commits
        self.engine = engine
        if recipe is None:
            from reef.learning.recipes_registry import load_recipe

            recipe = load_recipe(settings.learning.recipe, settings)
        self.recipe: Recipe = recipe
        check_rollout(settings, recipe)
        self.learns = recipe.surface.learns
        self.gate = GateSources(settings)
        self.evaluator = evaluator or default_evaluator(
            recipe,
            learner_engine,
            settings,
            context_for=self.context_for,
            gate_for=self.gate_tasks,
            release_dir=functools.partial(release_dir, releases),
        )
        self.serving = ServingContexts(recipe, releases, engine, prepends_prompt=not self.evaluator.runs_agent)
        self.selector = selector or default_selector(recipe, settings)
        self._started = False
        # Rollouts and scenarios call each other: each reaches the other through a name looked up when called.
        self.rollouts = Rollouts(
            settings,
            records,
            releases,
            self.serving,
            leads=lambda name: name in self.scenarios.learners,
            learner_of=lambda name: self.scenarios.learners.get(name),
            commit_lock=lambda name: self.scenarios.commit_lock(name),
            published=lambda name, release: self.scenarios.published(name, release),
        )
        self.services = LearningServices(
            settings,
            records,
            releases,
            commits,
            learner_engine,
            recipe,
            self.evaluator,
            self.selector,
            backend_factory or default_backend_factory(settings),
            self.gate,
            self.budget,
            rollouts=self.rollouts,
            learns=self.learns,
        )
        self.scenarios = Scenarios(
            self.services,
            serving=self.serving,
            election=election or SoleElection(settings.reef.replica_id),
            hints=hints or NoHints(),
        )
        self.replica = self.scenarios.replica
        self.recording = Recording(records, self.notify)
        self.history = ReleaseHistory(releases, self.rollouts, self.scenarios)
        self.harness = HarnessSurface(settings, recipe, self.history, engine, self.notify)
        self._retention: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve each live scenario's head release, then start (and resume) its learner and the rollout checks."""
        await self.rollouts.sync()
        scenarios = await self.scenarios.start()
        self.rollouts.start()
        if self.settings.storage.retention_max_body_bytes is not None:
            retention = self.recording.enforce_retention(self.settings.storage.retention_max_body_bytes)
            self._retention = asyncio.create_task(retention, name="reef-retention")
        self._started = True
        log.info(
            "runtime: replica %s, %d scenarios (leading %d), recipe %s, learning %s",
            self.replica.replica_id,
            len(scenarios),
            len(self.replica.leading),
            self.recipe.name,
            self.settings.learning.mode if self.learns else "off",
        )

    async def stop(self) -> None:
        """Stop every learner (unacknowledged batches are retried at the next start), then give up its locks."""
        if self._retention is not None:
            self._retention.cancel()
            self._retention = None
        await self.rollouts.stop()
        await self.scenarios.stop()

    # ---- scenarios -------------------------------------------------------------------------------------------

    def known_scenario(self, name: str) -> bool:
        """Whether `name` is a live scenario with a serving release (in memory; the hot path)."""
        return name in self.scenarios.known

    async def ensure_scenario(self, name: str, release_id: str | None = None) -> tuple[ScenarioInfo, bool]:
        """Create the scenario (records + base release, activated) if absent; `(info, created)` (see
        `Scenarios.ensure`)."""
        return await self.scenarios.ensure(name, release_id)

    async def delete_scenario(self, name: str) -> None:
        """Archive the scenario's records and release refs and stop its learner; NotFound if unknown."""
        await self.scenarios.delete(name)

    # ---- serving ---------------------------------------------------------------------------------------------

    def context_for(self, scenario: str, release_id: str | None) -> RequestContext:
        """The request context: the serving release, or a pinned one (NotFound if it is not the scenario's)."""
        return self.serving.context_for(scenario, release_id)

    def route(self, scenario: str, release_id: str | None, tags: dict[str, str]) -> tuple[RequestContext, str | None]:
        """A request's context: a pinned release, else an open rollout's arm for its sticky key, else the serving
        release; and the id of the rollout that chose it (None when none did)."""
        return self.rollouts.route(scenario, release_id, tags)

    async def route_request(
        self, scenario: str, release_id: str | None, tags: dict[str, str]
    ) -> tuple[RequestContext, str | None]:
        """`route` for a request on the event loop: a pin memory cannot answer is read from the release store in a
        worker thread first (and one that names no release is remembered for a while)."""
        await self.serving.prepare(scenario, release_id)
        return self.route(scenario, release_id, tags)

    def pinned_pending(self, scenario: str, release_id: str) -> bool:
        """Whether a pin a request was routed with names a pending release (from memory)."""
        return self.serving.pinned_pending(scenario, release_id)

    async def request_failed(self, scenario: str, rollout_id: str, ctx: RequestContext) -> None:
        """A request a rollout routed failed (5xx, timeout): it counts against its arm."""
        await self.rollouts.failed(scenario, rollout_id, ctx)

    def rollout(self, scenario: str) -> RolloutView:
        """The scenario's open or last rollout (`state` `none` when it never had one)."""
        self._require(scenario)
        return self.rollouts.view(scenario)

    def rollout_views(self) -> dict[str, RolloutView]:
        """Every live scenario's open or last rollout, for the metrics (scenarios that never had one left out)."""
        return self.rollouts.views(self.scenarios.known)

    async def end_rollout(self, scenario: str, action: str) -> RolloutView:
        """Promote or roll back the scenario's open rollout now; Conflict when none is open."""
        self._require(scenario)
        return await self.rollouts.act(scenario, action)

    def validate_report(self, scenario: str, report: dict[str, Any]) -> None:
        """Check a report's fields the recipe reads; raises BadRequest naming a malformed one (a report lacking
        what the recipe trains from passes, and is skipped when batches are built)."""
        parse_report(self.recipe, report)

    async def archive(self, scenario: str, limit: int) -> ArchiveView:
        """The search archive the serving release carries; NotFound when the recipe does not search."""
        self._require(scenario)
        search, path = await serving_search(self.recipe, self.release_store, scenario)
        return await asyncio.to_thread(search.archive_view, path, limit)

    async def archive_next(self, scenario: str, groups: int) -> NextStepView:
        """The next search step's `groups` parents and prompts, from the serving release's archive."""
        self._require(scenario)
        search, path = await serving_search(self.recipe, self.release_store, scenario)
        return await asyncio.to_thread(search.next_step, path, groups)

    def notify(self, scenario: str) -> None:
        """Records of `scenario` were appended: wake its learner (never blocks)."""
        learner = self.scenarios.learners.get(scenario)
        if learner is not None:
            learner.wake()

    # ---- releases and commits --------------------------------------------------------------------------------

    def releases(self, scenario: str) -> list[ReleaseRow]:
        """Every release of `scenario`, newest first (`ReleaseHistory.releases`; reads git)."""
        self._require(scenario)
        return self.history.releases(scenario)

    async def release(self, scenario: str, release_id: str | None) -> Release:
        """The release `release_id` of `scenario`, or its serving one when None; NotFound if there is none."""
        return await self.history.release(scenario, release_id)

    async def materialize(self, release: Release) -> Path:
        """The directory holding the release's content (checked out once, then cached)."""
        return await asyncio.to_thread(self.release_store.materialize, release)

    async def rollback(self, scenario: str, release_id: str) -> Release:
        """Serve an earlier release again, as a new release; Conflict if it is pending or already serving."""
        self._require(scenario)
        return await self.history.restore(scenario, release_id, "rollback")

    async def promote(self, scenario: str, release_id: str) -> Release:
        """Serve a pending (reviewed) release, as a new release; Conflict if it is not pending."""
        self._require(scenario)
        return await self.history.restore(scenario, release_id, "promote")

    def commits(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[Commit]:
        """The learner's step log of `scenario`, ascending from `after_step`; with `record_id`, only the step(s)
        that consumed that record (reads the commit log: call it from a worker thread)."""
        self._require(scenario)
        return self.commit_log.list(scenario, after_step, limit, record_id=record_id)

    def _require(self, scenario: str) -> None:
        if scenario not in self.scenarios.known and self.records.scenario(scenario) is None:
            raise NotFound(f"scenario {scenario!r} does not exist")

    # ---- gate tasks ------------------------------------------------------------------------------------------

    def gate_tasks(self, scenario: str) -> GateTasks:
        """What the gate of `scenario` judges on now (its own tasks, else its held-out split)."""
        learner = self.scenarios.learners.get(scenario)
        return learner.gate_tasks() if learner is not None else self.gate.explicit(scenario)

    def tasks(self, scenario: str) -> GateTasksView:
        """The API-given tasks of `scenario` and what its gate uses now."""
        self._require(scenario)
        return {"tasks": self.gate.store.rows(scenario), "gate": self.gate_tasks(scenario).to_json()}

    def count_learner_usage(self, scenario: str, usage: dict[str, Any] | None) -> None:
        """Count what one of the learner's own requests that came over `/v1` (a gate episode's) spent upstream."""
        self.budget.spend(scenario, usage_tokens(usage))

    async def add_tasks(self, scenario: str, body: bytes) -> GateTasksAdded:
        """Validate and store gate tasks given as a request body (`{"tasks": [...]}` or JSONL); BadRequest names
        the task and field of the first problem, and then nothing is stored."""
        self._require(scenario)
        rows = parse_tasks_body(body, self.settings.evaluation.max_tasks_bytes)
        evaluation = self.settings.evaluation
        refuse_code_from_traffic(rows, evaluation.allow_api_code, evaluation.checker_modules)
        added = await asyncio.to_thread(self.gate.store.add, scenario, rows)
        await self._regate(scenario)
        return {"added": len(added), "tasks": added, "gate": self.gate_tasks(scenario).to_json()}

    async def clear_tasks(self, scenario: str) -> GateTasksCleared:
        """Forget the API-given tasks of `scenario`."""
        self._require(scenario)
        removed = await asyncio.to_thread(self.gate.store.clear, scenario)
        await self._regate(scenario)
        return {"removed": removed, "gate": self.gate_tasks(scenario).to_json()}

    async def _regate(self, scenario: str) -> None:
        """The scenario's own tasks changed: its learner re-reads its records with the matching held-out split."""
        learner = self.scenarios.learners.get(scenario)
        if learner is not None:
            await learner.regate()

    # ---- learning --------------------------------------------------------------------------------------------

    async def step(self, scenario: str) -> dict[str, Any] | None:
        """Run one learner step of `scenario` now; its commit as JSON, or None if no batch was ready."""
        self._require(scenario)
        learner = self.scenarios.learners.get(scenario)
        if learner is None:
            if not self.learns:
                return None
            await self.ensure_scenario(scenario)
            learner = self.scenarios.learners.get(scenario)
            if learner is None:
                raise self._not_leading(scenario)
        return await learner.step()

    # ---- training control ------------------------------------------------------------------------------------

    def _learner(self, scenario: str) -> Learner:
        self._require(scenario)
        learner = self.scenarios.learners.get(scenario)
        if learner is None and self.learns:
            raise self._not_leading(scenario)
        if learner is None:
            recipe = self.recipe.name
            raise Conflict(f"scenario {scenario!r} has recipe {recipe}, which does not learn; nothing to control")
        return learner

    def _not_leading(self, scenario: str) -> Conflict:
        leader = self.replica.leader_of(scenario)
        return Conflict(
            f"replica {self.replica.replica_id} does not learn scenario {scenario!r}; its learner runs on "
            f"{leader or 'no replica yet (an election is due)'}: send training control there"
        )

    async def update_control(
        self,
        scenario: str,
        training_mode: str | None = None,
        paused: bool | None = None,
        rollout_mode: str | None = None,
    ) -> ControlView:
        """Set the scenario's training mode, pause or resume its learning, and/or set its rollout mode (stored,
        kept across restarts)."""
        learner = self._learner(scenario)
        if rollout_mode is not None:
            await self.rollouts.set_mode(scenario, rollout_mode)
        changes = training_mode is not None or paused is not None
        control = await learner.set_control(training_mode, paused) if changes else learner.control()
        return {"scenario": scenario, **control, "rollout_mode": self.rollouts.mode(scenario)}

    async def request_step(self, scenario: str, text: str | None = None, release_id: str | None = None) -> StepQueued:
        """Queue a learner step of `scenario` now (see `Learner.request_step`); Conflict while a rollout is open."""
        self.rollouts.require_none_open(scenario, "a requested step")
        return await self._learner(scenario).request_step(text, release_id)

    def contract(self, scenario: str) -> ContractView:
        """What a client needs to feed the scenario: its recipe, report schema, training control and readiness."""
        self._require(scenario)
        learner = self.scenarios.learners.get(scenario)
        state = learner.status() if learner is not None else None
        return contract(scenario, self.recipe, self.settings.learning.batch_size, state)

    def status(self) -> StatusView:
        """What `GET /reef/status` answers (`deployment_status`)."""
        return deployment_status(self.settings, self.recipe, self.learns, self.engine, self.scenarios)
