"""One learner step, run to its commit: grow a candidate (from the tip of the working lineage, else the serving
release, else the release a request names; on the batch plus earlier samples replayed, see `rehearsal`) → judge it
paired against the serving release → settle it (see `settlement`) → mark the batch's records consumed; or a
`skipped` commit that says why no candidate was settled.

A step that fails writes a `skipped` commit that consumes nothing (the batch is retried) until it has failed
`MAX_ATTEMPTS` times in a row, then consumes it; a step that cannot be judged (see `gate`) trains nothing and
consumes nothing. Each writer checks first that this replica still leads the scenario (`LostLeadership`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reef.core.errors import Conflict
from reef.core.releases import Commit, Release, Verdict
from reef.learning.activity import StepActivity
from reef.learning.base import Batch, Processor, Selector
from reef.learning.evaluation.selectors import load_selector
from reef.learning.gate import ScenarioGate
from reef.learning.growth import GrowContext, grow
from reef.learning.judgement import Judgement, judge, release_id_of, unjudged
from reef.learning.lineage import NO_PARENTS, StepParents, WorkingLineage
from reef.learning.rehearsal import Rehearsal, with_replay
from reef.learning.services import LearningServices
from reef.learning.settlement import Activate, Settlement
from reef.observability import tracing

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


class LostLeadership(Conflict):
    """This replica no longer holds the scenario's learner lock: the step ends before publishing, writing nothing."""


@dataclasses.dataclass(frozen=True, slots=True)
class StepEnd:
    """How a step ended: its commit, and whether the learner must rebuild its processor from the stores (a skipped
    step retries its batch; an acknowledgement that failed leaves records the commit log consumed)."""

    commit: Commit
    resume: bool


class Steps:
    """Runs one scenario's steps to their commits and keeps its place in the commit log: the last step and commit,
    the failures in a row, and why learning is blocked, if it is."""

    def __init__(
        self,
        scenario: str,
        services: LearningServices,
        *,
        gate: ScenarioGate,
        lineage: WorkingLineage,
        activity: StepActivity,
        activate: Activate,
        commit_lock: asyncio.Lock,
        leading: Callable[[], Awaitable[bool]] | None,
    ) -> None:
        self.scenario = scenario
        self.recipe = services.recipe
        self.settings = services.settings
        self.records = services.records
        self.releases = services.releases
        self.commits = services.commits
        self.engine = services.engine
        self.evaluator = services.evaluator
        self.selector = services.selector
        self.gate = gate
        self.lineage = lineage
        self.activity = activity
        self._backend_factory = services.backend_factory
        self._leading = leading  # checked right before each publish: does this replica still hold the lock?
        self._settlement = Settlement(
            scenario,
            services.recipe.name,
            services.settings.learning.review,
            services.releases,
            services.commits,
            lineage,
            commit_lock,  # shared with rollback/promote: head moves and activations never interleave
            activate,
            activity,
            services.rollouts,
        )
        self.step = 0
        self.failures = 0
        self.last_commit: Commit | None = None
        self.blocked: str | None = None
        self.request: dict[str, Any] | None = None  # the request the step in flight answers
        self.rehearsal = Rehearsal.of(scenario, self.recipe, self.settings, self.records, self.commits)

    async def run(self, batch: Batch, processor: Processor) -> StepEnd:
        """Run the next step on `batch` to its commit: settled, or skipped when it failed or the head moved."""
        step = self.step + 1
        work_root = Path(self.settings.storage.dir).expanduser() / "work"
        work_root.mkdir(parents=True, exist_ok=True)
        work_dir = Path(tempfile.mkdtemp(prefix=f"{self.scenario}-step{step}-", dir=work_root))
        step_id = self.request["step_id"] if self.request is not None else None
        self.activity.begin(step, batch.batch_id, len(batch.samples), step_id)
        log.info("learner %s: step %d growing a candidate from %d samples", self.scenario, step, len(batch.samples))
        # One trace per step (when tracing is on): batch, train, evaluate and publish are its children.
        traced = tracing.span(
            "reef.learner.step", scenario=self.scenario, step=step, batch_id=batch.batch_id, samples=len(batch.samples)
        )
        try:
            with traced as step_span:
                try:
                    commit = await self._grow_judge_commit(step, batch, work_dir, processor)
                except LostLeadership:
                    raise
                except Conflict as exc:
                    commit = await self._skip(step, batch, f"the head moved ({exc.message})", failed=False)
                    step_span.set(verdict=commit.verdict)
                    return StepEnd(commit, resume=True)
                except Exception as exc:
                    log.exception("learner %s: step %d failed", self.scenario, step)
                    commit = await self._skip(step, batch, f"{type(exc).__name__}: {exc}")
                    step_span.set(verdict=commit.verdict, error=f"{type(exc).__name__}: {exc}")
                    return StepEnd(commit, resume=True)
                self.step, self.failures, self.last_commit = step, 0, commit
                step_span.set(verdict=commit.verdict, release_id=commit.release_id, loss=commit.metrics.get("loss"))
                return StepEnd(commit, resume=not await self._consume(batch, step, processor))
        finally:
            self.activity.idle()
            shutil.rmtree(work_dir, ignore_errors=True)

    async def _grow_judge_commit(self, step: int, batch: Batch, work_dir: Path, processor: Processor) -> Commit:
        with tracing.span("reef.learner.batch", records=len(batch.record_ids), instruction=batch.instruction):
            head = await asyncio.to_thread(self.releases.head, self.scenario)
            parents = await asyncio.to_thread(self.lineage.parents, head)
            asked_from = self.request.get("release_id") if self.request is not None else None
            if asked_from is not None:  # a requested step may train from any release; it is judged against the head
                parents = StepParents(head, await asyncio.to_thread(self.releases.get, self.scenario, asked_from))
            trained_from = parents.trained_from
            parent_dir = await asyncio.to_thread(self.releases.materialize, trained_from) if trained_from else None
            replayed = await self._replay(batch, step)
        self.activity.job["trained_from"] = release_id_of(trained_from)
        ctx = GrowContext(
            self.scenario,
            step,
            work_dir,
            self.settings,
            self.engine,
            self.records,
            trained_from,
            self.activity.progress,
            backend_factory=self._backend_factory,
            releases=self.releases,
            commits=self.commits,
        )
        with tracing.span("reef.learner.train", recipe=self.recipe.name, trained_from=release_id_of(trained_from)):
            passes = self.rehearsal.passes_over(replayed, step) if self.rehearsal is not None else []
            candidate = await grow(self.recipe, with_replay(batch, passes), parent_dir, ctx)
        if replayed:
            candidate = dataclasses.replace(
                candidate, metrics={**candidate.metrics, "rehearsal_samples": len(replayed)}
            )
        self.activity.job["state"] = "evaluating"
        with tracing.span("reef.learner.evaluate") as evaluated:
            # only a policy that always accepts gets past the gate with no tasks
            if self.gate.uses_tasks and not self.gate.tasks(processor).size():
                metrics = dict(candidate.metrics)
                judgement = Judgement([], [], "accepted", "no gate tasks; policy always accepts", metrics)
            else:
                self.gate.serving(head)
                selector = self._selector_for(batch)
                # A step an operator directed under its own policy is not held to the earlier lessons.
                retention = self.gate.retention(processor) if selector is self.selector else None
                judgement = await judge(
                    self.evaluator,
                    selector,
                    self.scenario,
                    candidate.path,
                    candidate.metrics,
                    head,
                    retention,
                    self.settings.evaluation.max_regression,
                )
            evaluated.set(outcome=judgement.outcome, tasks=len(judgement.candidate_scores))
        await self._check_leading(step)
        with tracing.span("reef.learner.publish", outcome=judgement.outcome):
            commit = await self._settlement.settle(step, batch, candidate, parents, self._answering(judgement))
        if commit.verdict == "published":  # the retention set is drawn against the new serving release from now on
            self.gate.serving(await asyncio.to_thread(self.releases.head, self.scenario))
        return commit

    async def _replay(self, batch: Batch, step: int) -> list[dict[str, Any]]:
        """The earlier samples rehearsal adds to `batch` (none when it is off)."""
        if self.rehearsal is None:
            return []
        every, rollouts = self.gate.holdout_every(), self.engine.scores_completions
        return await asyncio.to_thread(self.rehearsal.replay, batch, step, every, rollouts)

    def _selector_for(self, batch: Batch) -> Selector:
        """The recipe's `instruction_policy` for a step that carries an operator's instruction, else the scenario's."""
        policy = self.recipe.gate().instruction_policy
        if batch.instruction and policy is not None:
            return load_selector(policy, self.settings)
        return self.selector

    async def _consume(self, batch: Batch, step: int, processor: Processor) -> bool:
        """Mark the batch's records consumed and acknowledge it; False when that failed (the commit log holds the
        ids: a resume marks them)."""
        try:
            await asyncio.to_thread(self.records.mark_consumed, self.scenario, batch.record_ids, step)
            processor.acknowledge(batch.batch_id)
        except Exception as exc:
            log.exception("learner %s: marking step %d consumed failed", self.scenario, step)
            self.activity.error(step, f"marking records consumed failed: {type(exc).__name__}: {exc}")
            return False
        return True

    async def _check_leading(self, step: int) -> None:
        """Before anything is written to the shared stores: LostLeadership if another replica may learn now."""
        if self._leading is not None and not await self._leading():
            raise LostLeadership(f"this replica lost the learner lock of scenario {self.scenario!r} before step {step}")

    # ---- skipped commits -------------------------------------------------------------------------------------

    async def _skip(self, step: int, batch: Batch, reason: str, failed: bool = True) -> Commit:
        await self._check_leading(step)
        self.failures += 1 if failed else 0
        give_up = self.failures >= MAX_ATTEMPTS
        consumed = list(batch.record_ids) if give_up else []
        reason += f"; gave up on this batch after {MAX_ATTEMPTS} attempts" if give_up else "; the batch will be retried"
        skipped = unjudged(reason, {"batch_record_ids": list(batch.record_ids)})
        commit = self._commit(step, "skipped", None, NO_PARENTS, skipped, consumed)
        self.activity.error(step, reason)
        try:
            await asyncio.to_thread(self.commits.append, commit)
            self.step, self.last_commit = step, commit
            if give_up:
                self.failures = 0
                await asyncio.to_thread(self.records.mark_consumed, self.scenario, consumed, step)
        except Exception as exc:
            log.exception("learner %s: recording skipped step %d failed", self.scenario, step)
            self.activity.error(step, f"commit log append failed: {type(exc).__name__}: {exc}")
        return commit

    async def block(self, reason: str) -> dict[str, Any]:
        """Learning cannot be judged: say so once in the commit log, consume nothing, train nothing."""
        if self.blocked != reason:
            self.blocked = reason
            await self.decline(reason)
        assert self.last_commit is not None
        return self.last_commit.to_json()

    async def decline(self, reason: str) -> None:
        """A `skipped` commit that trained nothing and consumes nothing, saying why."""
        await self._check_leading(self.step + 1)
        self.activity.error(None, reason)
        commit = self._commit(self.step + 1, "skipped", None, NO_PARENTS, unjudged(reason), [])
        await asyncio.to_thread(self.commits.append, commit)
        self.step, self.last_commit = commit.step, commit

    async def record_outcome(
        self, verdict: Verdict, reason: str, release_id: str | None, parent_release_id: str | None, metrics: dict
    ) -> Commit:
        """Append, as the next step, a commit that no training step made (a rollout's decision); consumes nothing."""
        commit = Commit(
            self.scenario,
            self.step + 1,
            verdict,
            reason,
            release_id,
            parent_release_id,
            [],
            [],
            metrics,
            [],
            time.time(),
        )
        await asyncio.to_thread(self.commits.append, commit)
        self.step, self.last_commit = commit.step, commit
        return commit

    async def discard(self, processor: Processor | None) -> None:
        """Commit what the processor dropped on its own (an sdpo grid spanning releases) as skipped, consuming it."""
        for reason, record_ids in processor.discarded() if processor is not None else []:
            await self._check_leading(self.step + 1)
            commit = self._commit(self.step + 1, "skipped", None, NO_PARENTS, unjudged(reason), record_ids)
            await asyncio.to_thread(self.commits.append, commit)
            await asyncio.to_thread(self.records.mark_consumed, self.scenario, record_ids, commit.step)
            self.step, self.last_commit = commit.step, commit

    def _answering(self, judgement: Judgement) -> Judgement:
        """`judgement`, naming the request the step in flight answers (a requested step's commit says which)."""
        if self.request is None:
            return judgement
        request = {key: self.request.get(key) for key in ("step_id", "text", "release_id")}
        return dataclasses.replace(judgement, metrics={**judgement.metrics, "request": request})

    def _commit(
        self,
        step: int,
        verdict: Verdict,
        release: Release | None,
        parents: StepParents,
        judgement: Judgement,
        consumed: list[str],
    ) -> Commit:
        judgement = self._answering(judgement)
        return judgement.commit(self.scenario, step, verdict, release, parents, consumed, self.lineage.tip_id)
