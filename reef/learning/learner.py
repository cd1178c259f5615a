"""The per-scenario learner: the single writer of a scenario's releases.

One step: build a batch → grow a candidate (from the tip of the working lineage, else the serving release) →
evaluate it paired against the serving release on the gate's tasks → select → publish (compare-and-swap on the
head; pending under review) → append the commit log (the commit point) → activate in the engine → mark the
batch's records consumed → acknowledge the batch.

A candidate that ties (see `judgement`) is kept as the tip of the working lineage (see `lineage`) and the next
step trains from it; one that loses is dropped and the lineage returns to the serving release.

A crash before the commit log leaves the old release serving and the batch unconsumed, so it is retried; a
crash after it is repaired on resume (see `recovery`). A rejected candidate
consumes its records too: the commit says why. A failing step writes a `skipped` commit that consumes nothing
(the batch is retried with backoff) until it has failed `max_attempts` times in a row, then consumes it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reef.core.errors import Conflict
from reef.core.releases import Commit, Release, Verdict
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.base import Batch, Evaluator, Processor, Recipe, Selector
from reef.learning.evaluation.scores import paired_summary
from reef.learning.evaluation.selectors import Always
from reef.learning.evaluation.tasks import GateTasks
from reef.learning.gate import GateSources, ScenarioGate
from reef.learning.growth import Candidate, GrowContext, grow
from reef.learning.judgement import Judgement, judge, release_id_of, unjudged
from reef.learning.lineage import NO_PARENTS, StepParents, WorkingLineage
from reef.learning.recovery import feed_new, resume
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore

log = logging.getLogger(__name__)

Activate = Callable[[str, Release], Awaitable[None]]

MAX_ATTEMPTS = 3
MAX_BACKOFF_S = 60.0


class Learner:
    """Turns one scenario's records into releases, in `auto` mode (a background task) or `manual` (`step()`)."""

    def __init__(
        self,
        scenario: str,
        *,
        recipe: Recipe,
        settings: Settings,
        records: RecordStore,
        releases: ReleaseStore,
        commits: CommitLog,
        engine: Engine,
        evaluator: Evaluator,
        selector: Selector,
        activate: Activate,
        commit_lock: asyncio.Lock,
        backend_factory: Callable[[], Any],
        gate: GateSources,
    ) -> None:
        self.scenario = scenario
        self.recipe = recipe
        self.settings = settings
        self.records = records
        self.releases = releases
        self.commits = commits
        self.engine = engine
        self.evaluator = evaluator
        self.selector = selector
        self._activate = activate
        self._commit_lock = commit_lock  # shared with rollback/promote: head moves and activations never interleave
        self._backend_factory = backend_factory
        self.gate = ScenarioGate(
            scenario, gate, bool(getattr(evaluator, "uses_gate_tasks", False)), isinstance(selector, Always)
        )
        self.lineage = WorkingLineage(scenario, releases)
        self._step_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._processor: Processor | None = None
        self._cursor = 0
        self._step = 0
        self._failures = 0
        self._last_commit: Commit | None = None
        self._blocked: str | None = None
        self._job: dict[str, Any] = {"state": "idle"}
        self._losses: collections.deque[float] = collections.deque(maxlen=50)
        self._errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=10)

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume from the stores and, in `auto` mode, start stepping in the background."""
        try:
            await asyncio.to_thread(self._resume)
        except Exception as exc:  # serve anyway; the loop (or the next step) retries the resume
            log.exception("learner %s: resume failed", self.scenario)
            self._error(None, f"resume failed: {type(exc).__name__}: {exc}")
        if self.settings.learning.mode == "auto":
            self._task = asyncio.create_task(self._run(), name=f"reef-learner-{self.scenario}")

    async def stop(self) -> None:
        """Stop the background loop; an unacknowledged batch is retried by the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def wake(self) -> None:
        """Records were appended: look for a ready batch now rather than at the next poll."""
        self._wake.set()

    # ---- stepping --------------------------------------------------------------------------------------------

    async def step(self) -> dict[str, Any] | None:
        """Run one step now if a batch can be built; the step's commit as JSON, or None if nothing was ready."""
        async with self._step_lock:
            await self._pull()
            assert self._processor is not None
            if self._processor.ready() == 0:
                return None
            blocker = self.gate.blocker(self._processor)
            if blocker is not None:
                return await self._block(blocker)
            self._blocked = None
            batch = self._processor.build_batch()
            if batch is None:
                return None
            return (await self._run_step(batch)).to_json()

    async def regate(self) -> None:
        """The scenario's own tasks changed: rebuild the processor with the held-out split they call for."""
        async with self._step_lock:
            await asyncio.to_thread(self._resume)
            self._blocked = None
        self.wake()

    async def _run(self) -> None:
        batch_size = self.settings.learning.batch_size
        poll_s = self.settings.learning.poll_interval_s
        while True:
            try:
                await self._pull()
                assert self._processor is not None
                still_blocked = self._blocked is not None and self.gate.blocker(self._processor) is not None
                # A processor may count units coarser than samples (grpo: whole groups); it says how many make a batch.
                needed = getattr(self._processor, "units_per_batch", batch_size)
                if self._processor.ready() >= needed and not still_blocked and await self.step() is not None:
                    if self._failures:
                        await self._sleep(min(poll_s * 2**self._failures, MAX_BACKOFF_S))
                    continue  # another batch may be ready already
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the loop die: the server keeps serving
                log.exception("learner %s: loop error", self.scenario)
                self._error(None, f"{type(exc).__name__}: {exc}")
            await self._sleep(poll_s)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        self._wake.clear()

    async def _run_step(self, batch: Batch) -> Commit:
        step = self._step + 1
        work_root = Path(self.settings.storage.dir).expanduser() / "work"
        work_root.mkdir(parents=True, exist_ok=True)
        work_dir = Path(tempfile.mkdtemp(prefix=f"{self.scenario}-step{step}-", dir=work_root))
        self._job = {
            "state": "growing",
            "step": step,
            "batch_id": batch.batch_id,
            "samples": len(batch.samples),
            "started_at": time.time(),
            "progress": None,
        }
        log.info("learner %s: step %d growing a candidate from %d samples", self.scenario, step, len(batch.samples))
        try:
            try:
                commit = await self._grow_judge_commit(step, batch, work_dir)
            except Conflict as exc:
                return await self._skip(step, batch, f"the head moved during the step ({exc.message})", failed=False)
            except Exception as exc:
                log.exception("learner %s: step %d failed", self.scenario, step)
                return await self._skip(step, batch, f"{type(exc).__name__}: {exc}")
            self._step, self._failures, self._last_commit = step, 0, commit
            await self._consume(batch, step)
            return commit
        finally:
            self._job = {"state": "idle"}
            shutil.rmtree(work_dir, ignore_errors=True)

    async def _grow_judge_commit(self, step: int, batch: Batch, work_dir: Path) -> Commit:
        head = await asyncio.to_thread(self.releases.head, self.scenario)
        parents = await asyncio.to_thread(self.lineage.parents, head)
        trained_from = parents.trained_from
        parent_dir = await asyncio.to_thread(self.releases.materialize, trained_from) if trained_from else None
        self._job["trained_from"] = release_id_of(trained_from)
        ctx = GrowContext(
            self.scenario, step, work_dir, self.settings, self.engine, self.records, trained_from, self._progress
        )
        candidate = await grow(self.recipe, batch, parent_dir, ctx, self._backend_factory)
        self._job["state"] = "evaluating"
        if self.gate.uses_tasks and not self.gate_tasks().size():  # only a policy that always accepts gets here
            judgement = Judgement([], [], "accepted", "no gate tasks; policy always accepts", dict(candidate.metrics))
        else:
            judgement = await judge(
                self.evaluator, self.selector, self.scenario, candidate.path, candidate.metrics, head
            )
        if judgement.outcome == "accepted":
            log.info("learner %s: step %d accepted: %s", self.scenario, step, judgement.reason)
            self._job["state"] = "publishing"
            return await self._publish(step, batch, candidate, parents, judgement)
        if judgement.outcome == "tie" and head is not None:
            log.info("learner %s: step %d kept as the lineage's tip: %s", self.scenario, step, judgement.reason)
            return await self._keep(step, batch, candidate, parents, judgement)
        log.info("learner %s: step %d rejected: %s", self.scenario, step, judgement.reason)
        # A candidate that lost is dropped and the lineage returns to the serving release; one that could not be
        # judged (the evaluation failed) leaves the lineage as it was.
        lost = judgement.outcome != "failed"
        if lost:
            self.lineage.tip_id = None
        commit = self._commit(step, "rejected", None, parents, judgement, batch.record_ids)
        await asyncio.to_thread(self.commits.append, commit)
        if lost:
            await asyncio.to_thread(self.lineage.end)
        return commit

    async def _keep(
        self, step: int, batch: Batch, candidate: Candidate, parents: StepParents, judgement: Judgement
    ) -> Commit:
        """Store a candidate that did not lose as the lineage's new tip; the next step trains from it."""
        tip = await asyncio.to_thread(
            self.lineage.keep, candidate.path, parents, step, self.recipe.name, judgement.metrics, batch.record_ids
        )
        reason = f"{judgement.reason}; did not lose: kept as the lineage's tip, the next step trains from it"
        commit = self._commit(step, "kept", tip, parents, judgement, batch.record_ids, reason)
        await asyncio.to_thread(self.commits.append, commit)
        return commit

    async def _publish(
        self,
        step: int,
        batch: Batch,
        candidate: Candidate,
        parents: StepParents,
        judgement: Judgement,
    ) -> Commit:
        review = self.settings.learning.review
        head = parents.head
        async with self._commit_lock:
            release = await asyncio.to_thread(
                self.releases.publish,
                self.scenario,
                candidate.path,
                head.release_id if head is not None else None,
                operation="training",
                step=step,
                recipe=self.recipe.name,
                # The consumed ids ride along so a crash before the commit log can be rolled forward on resume.
                metrics={
                    **judgement.metrics,
                    "trained_from": release_id_of(parents.trained_from),
                    "consumed_record_ids": list(batch.record_ids),
                },
                pending=review,
            )
            verdict: Verdict = "pending" if review else "published"
            self.lineage.tip_id = None  # a published (or pending) candidate ends the lineage
            commit = self._commit(step, verdict, release, parents, judgement, batch.record_ids)
            await asyncio.to_thread(self.commits.append, commit)
            await asyncio.to_thread(self.lineage.end)
            if not review:
                try:
                    await self._activate(self.scenario, release)
                except Exception as exc:  # committed already: the head serves after the next start
                    log.exception("learner %s: activation of %s failed", self.scenario, release.release_id)
                    self._error(step, f"activation failed: {type(exc).__name__}: {exc}")
        return commit

    async def _consume(self, batch: Batch, step: int) -> None:
        assert self._processor is not None
        try:
            await asyncio.to_thread(self.records.mark_consumed, batch.record_ids, step)
            self._processor.acknowledge(batch.batch_id)
        except Exception as exc:  # the commit log holds the ids: a resume marks them
            log.exception("learner %s: marking step %d consumed failed", self.scenario, step)
            self._error(step, f"marking records consumed failed: {type(exc).__name__}: {exc}")
            await asyncio.to_thread(self._resume)

    async def _skip(self, step: int, batch: Batch, reason: str, failed: bool = True) -> Commit:
        self._failures += 1 if failed else 0
        give_up = self._failures >= MAX_ATTEMPTS
        consumed = list(batch.record_ids) if give_up else []
        reason += f"; gave up on this batch after {MAX_ATTEMPTS} attempts" if give_up else "; the batch will be retried"
        skipped = unjudged(reason, {"batch_record_ids": list(batch.record_ids)})
        commit = self._commit(step, "skipped", None, NO_PARENTS, skipped, consumed)
        self._error(step, reason)
        try:
            await asyncio.to_thread(self.commits.append, commit)
            self._step, self._last_commit = step, commit
            if give_up:
                self._failures = 0
                await asyncio.to_thread(self.records.mark_consumed, consumed, step)
        except Exception as exc:
            log.exception("learner %s: recording skipped step %d failed", self.scenario, step)
            self._error(step, f"commit log append failed: {type(exc).__name__}: {exc}")
        # A fresh processor gets every unconsumed record again, the failed batch included.
        await asyncio.to_thread(self._resume)
        return commit

    async def _block(self, reason: str) -> dict[str, Any]:
        """Learning cannot be judged: say so once in the commit log, consume nothing, train nothing."""
        if self._blocked != reason:
            self._blocked = reason
            self._error(None, reason)
            commit = self._commit(self._step + 1, "skipped", None, NO_PARENTS, unjudged(reason), [])
            await asyncio.to_thread(self.commits.append, commit)
            self._step, self._last_commit = commit.step, commit
        assert self._last_commit is not None
        return self._last_commit.to_json()

    def gate_tasks(self) -> GateTasks:
        """What the gate judges on now: the scenario's own tasks (API, file), else its held-out split."""
        return self.gate.tasks(self._processor)

    # ---- resume ----------------------------------------------------------------------------------------------

    def _resume(self) -> None:
        every = self.gate.holdout_every()
        resumed = resume(
            self.scenario,
            self.recipe,
            self.records,
            self.releases,
            self.commits,
            holdout_every=every,
            hold_rollouts=self.engine.scores_completions,
        )
        self._processor, self._cursor = resumed.processor, resumed.cursor
        self.gate.restarted()
        self.lineage.tip_id = resumed.lineage_id
        self._step = max(resumed.last_step, self._step)
        self._last_commit = resumed.last_commit

    async def _pull(self) -> None:
        """Feed records appended since the last look to the processor."""
        if self._processor is None:
            await asyncio.to_thread(self._resume)
            return
        self._cursor = await feed_new(self.records, self.scenario, self._processor, self._cursor)

    # ---- status ----------------------------------------------------------------------------------------------

    def _progress(self, event: dict[str, Any]) -> None:
        # Called from the training worker thread; plain assignments are safe enough for a status view.
        self._job["progress"] = event
        if isinstance(event.get("loss"), int | float):
            self._losses.append(float(event["loss"]))
        log.info("learner %s: %s", self.scenario, event)

    def _error(self, step: int | None, message: str) -> None:
        self._errors.append({"at": time.time(), "step": step, "message": message})

    def _commit(
        self,
        step: int,
        verdict: Verdict,
        release: Release | None,
        parents: StepParents,
        judgement: Judgement,
        consumed: list[str],
        reason: str | None = None,
    ) -> Commit:
        return judgement.commit(self.scenario, step, verdict, release, parents, consumed, self.lineage.tip_id, reason)

    def status(self) -> dict[str, Any]:
        """Step, buffered units, the job in flight, the last verdict with its scores, recent errors."""
        last = self._last_commit
        return {
            "mode": self.settings.learning.mode,
            "step": self._step,
            "ready": self._processor.ready() if self._processor is not None else 0,
            "batch_size": self.settings.learning.batch_size,
            "records_seen": self._cursor,
            "job": dict(self._job),
            "recent_losses": list(self._losses),
            "last_commit": None
            if last is None
            else {
                "step": last.step,
                "verdict": last.verdict,
                "reason": last.reason,
                "release_id": last.release_id,
                "candidate_scores": last.candidate_scores,
                "current_scores": last.current_scores,
                **paired_summary(last.candidate_scores, last.current_scores),
            },
            "blocked": self._blocked,
            "gate": self.gate.status(self._processor),
            "lineage": {"tip_release_id": self.lineage.tip_id},
            "consecutive_failures": self._failures,
            "errors": list(self._errors),
        }
