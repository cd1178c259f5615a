"""The per-scenario learner: the single writer of a scenario's releases.

One step: build a batch → grow a candidate (from the tip of the working lineage, else the serving release) →
evaluate it paired against the serving release on the gate's tasks → select → publish (compare-and-swap on the
head; pending under review) → append the commit log (the commit point) → activate in the engine → mark the
batch's records consumed → acknowledge the batch.

A candidate that ties (see `judgement`) is kept as the tip of the working lineage (see `lineage`) and the next
step trains from it; one that loses is dropped and the lineage returns to the serving release.

How a scenario trains is its `training_mode`: `auto` steps whenever a batch is ready, `manual` only on request
(`request_step`, from POST /reef/train: whatever is ready, with the operator's text handed to the recipe), `hybrid`
both; `paused` starts no step at all. Both and a queued request are stored with the scenario (`RecordStore.control`),
so a restart keeps them and runs a request that had not committed yet.

A crash before the commit log leaves the old release serving and the batch unconsumed, so it is retried; a
crash after it is repaired on resume (see `recovery`). A rejected candidate
consumes its records too: the commit says why. A failing step writes a `skipped` commit that consumes nothing
(the batch is retried with backoff) until it has failed `max_attempts` times in a row, then consumes it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest, Conflict
from reef.core.records import Record
from reef.core.releases import Commit, Release, Verdict
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.base import Batch, Evaluator, Processor, Recipe, Selector
from reef.learning.control import TrainingControl
from reef.learning.evaluation.scores import paired_summary
from reef.learning.evaluation.selectors import Always, load_selector
from reef.learning.evaluation.tasks import GateTasks
from reef.learning.gate import GateSources, ScenarioGate
from reef.learning.growth import GrowContext, grow
from reef.learning.judgement import Judgement, judge, release_id_of, unjudged
from reef.learning.lineage import NO_PARENTS, StepParents, WorkingLineage
from reef.learning.recovery import feed_new, resume
from reef.learning.settlement import Activate, Settlement
from reef.observability import tracing
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
MAX_BACKOFF_S = 60.0


class LostLeadership(Conflict):
    """This replica no longer holds the scenario's learner lock: the step ends before publishing, writing nothing."""


class Learner:
    """Turns one scenario's records into releases: a background task that steps as its training mode says."""

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
        leading: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.scenario = scenario
        self._leading = leading  # checked right before each publish: does this replica still hold the lock?
        self.recipe = recipe
        self.settings = settings
        self.records = records
        self.releases = releases
        self.commits = commits
        self.engine = engine
        self.evaluator = evaluator
        self.selector = selector
        self._backend_factory = backend_factory
        self.gate = ScenarioGate(
            scenario, gate, bool(getattr(evaluator, "uses_gate_tasks", False)), isinstance(selector, Always)
        )
        self.lineage = WorkingLineage(scenario, releases)
        self._settlement = Settlement(
            scenario,
            recipe.name,
            settings.learning.review,
            releases,
            commits,
            self.lineage,
            commit_lock,  # shared with rollback/promote: head moves and activations never interleave
            activate,
            self._commit,
            self._error,
            self._publishing,
        )
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
        self._control = TrainingControl(scenario, records, settings.learning.mode)
        self._running: dict[str, Any] | None = None  # the request the step in flight answers
        # Feedback computed from traffic (openclawrl's judge): runs beside the loop, its verdicts become records.
        self._feedback = recipe.feedback_source(scenario)
        self._feedback_task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume from the stores (its training control included) and start the background loop."""
        try:
            await asyncio.to_thread(self._resume)
            await asyncio.to_thread(self._control.resume, self._request_committed)
        except Exception as exc:  # serve anyway; the loop (or the next step) retries the resume
            log.exception("learner %s: resume failed", self.scenario)
            self._error(None, f"resume failed: {type(exc).__name__}: {exc}")
        self._task = asyncio.create_task(self._run(), name=f"reef-learner-{self.scenario}")
        if self._feedback is not None:
            self._feedback_task = asyncio.create_task(
                self._feedback.run(self._due, self._deliver), name=f"reef-feedback-{self.scenario}"
            )

    async def stop(self) -> None:
        """Stop the background loop; an unacknowledged batch is retried by the next start."""
        for task in (self._task, self._feedback_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._feedback_task = None

    def wake(self) -> None:
        """Records were appended: look for a ready batch now rather than at the next poll."""
        self._wake.set()

    # ---- training control ------------------------------------------------------------------------------------

    def control(self) -> dict[str, Any]:
        """The training mode, whether learning is paused, and the requested step (queued or running) if any."""
        return self._control.state(self._job.get("step_id"))

    async def set_control(self, training_mode: str | None = None, paused: bool | None = None) -> dict[str, Any]:
        """Change the training mode and/or pause or resume learning (stored first, then in effect)."""
        await self._control.set(training_mode, paused)
        mode, paused_now = self._control.mode, self._control.paused
        log.info("learner %s: training_mode %s%s", self.scenario, mode, ", paused" if paused_now else "")
        self.wake()
        return self.control()

    async def request_step(self, text: str | None = None, release_id: str | None = None) -> dict[str, Any]:
        """Queue one step now (POST /reef/train): it trains on what is ready, hands `text` to the recipe and, with
        `release_id`, trains from that release; it is judged against the serving release as any step is.

        Conflict while learning is paused, in training mode `auto`, while a step is queued or running, or when
        there is nothing to train on; NotFound for an unknown release.
        """
        async with self._control.lock:
            self._control.check_requestable()
            if self._job["state"] != "idle":
                raise Conflict(f"step {self._job.get('step')} of scenario {self.scenario!r} is running")
            if release_id is not None:
                await asyncio.to_thread(self.releases.get, self.scenario, release_id)  # NotFound names it
            # Queued under the step lock: an auto step waiting for it then sees the request and leaves it the units.
            async with self._step_lock:
                await self._pull()
                assert self._processor is not None
                if self._processor.ready() == 0 and self.recipe.takes_instructions and not text:
                    raise BadRequest(
                        f"scenario {self.scenario!r} has no ready units: a step of recipe {self.recipe.name} "
                        "needs an instruction to work from",
                        field="text",
                    )
                if self._processor.ready() == 0 and not (text and self.recipe.takes_instructions):
                    raise Conflict(
                        f"nothing to train on: scenario {self.scenario!r} has no ready units "
                        f"(recipe {self.recipe.name} needs reports to train on)"
                    )
                request = await self._control.queue(text, release_id)
        log.info("learner %s: step %s requested", self.scenario, request["step_id"])
        self.wake()
        return {**request, "scenario": self.scenario, "state": "queued"}

    def _request_committed(self, step_id: str) -> bool:
        last = self._last_commit
        return last is not None and (last.metrics.get("request") or {}).get("step_id") == step_id

    async def _requested_step(self, request: dict[str, Any]) -> None:
        """Run a requested step to its commit, then forget the request (a step cut short by `stop()` keeps it
        stored, so the next start runs it)."""
        stopping = False
        try:
            async with self._step_lock:
                await self._pull()
                assert self._processor is not None
                blocker = self._blocker()
                batch = None if blocker is not None else self._processor.build_batch(partial=True)
                text = request.get("text")
                if batch is None and blocker is None and text and self.recipe.takes_instructions:
                    batch = Batch(f"batch_{uuid.uuid4().hex}", [], [])
                self._running = request
                try:
                    if batch is None:
                        await self._decline(blocker or "nothing to train on: no ready units")
                    else:
                        await self._run_step(dataclasses.replace(batch, instruction=text))
                finally:
                    self._running = None
        except asyncio.CancelledError:
            stopping = True
            raise
        finally:
            if not stopping:
                await self._control.forget()

    # ---- computed feedback ---------------------------------------------------------------------------------

    def _due(self) -> list[Any]:
        return self._processor.due() if self._processor is not None else []

    async def _deliver(self, records: list[Record]) -> None:
        """Store what the feedback source computed (durably, like any record), then look for a ready batch."""
        await self.records.append_async(records)
        self.wake()

    def _blocker(self) -> str | None:
        """Why no step may start now: the feedback source is down, or the gate cannot judge."""
        assert self._processor is not None
        held = self._feedback.blocker() if self._feedback is not None else None
        return held or self.gate.blocker(self._processor)

    # ---- stepping --------------------------------------------------------------------------------------------

    async def step(self) -> dict[str, Any] | None:
        """Run one step now if a batch can be built; the step's commit as JSON, or None if nothing was ready."""
        async with self._step_lock:
            await self._pull()
            await self._discard()
            assert self._processor is not None
            # A step asked for (POST /reef/train) while this one waited for the lock takes the ready units itself.
            if self._processor.ready() == 0 or self._control.request is not None:
                return None
            blocker = self._blocker()
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
                if self._control.request is not None and not self._control.paused:
                    await self._requested_step(self._control.request)
                    continue
                if self._control.paused or self._control.mode == "manual":
                    if self._feedback is not None:  # the judge works on what the processor holds, in any mode
                        await self._pull()
                    await self._sleep(poll_s)
                    continue
                await self._pull()
                async with self._step_lock:
                    await self._discard()
                assert self._processor is not None
                still_blocked = self._blocked is not None and self._blocker() is not None
                # A processor may count units coarser than samples (grpo: whole groups); it says how many make a batch.
                needed = getattr(self._processor, "units_per_batch", batch_size)
                if self._processor.ready() >= needed and not still_blocked and await self.step() is not None:
                    if self._failures:
                        await self._sleep(min(poll_s * 2**self._failures, MAX_BACKOFF_S))
                    continue  # another batch may be ready already
            except asyncio.CancelledError:
                raise
            except LostLeadership as exc:  # another replica learns this scenario now; nothing here was written
                log.warning("learner %s: %s; stopping", self.scenario, exc.message)
                self._error(None, exc.message)
                return
            except Exception as exc:  # never let the loop die: the server keeps serving
                log.exception("learner %s: loop error", self.scenario)
                self._error(None, f"{type(exc).__name__}: {exc}")
            await self._sleep(poll_s)

    async def _sleep(self, seconds: float) -> None:
        # Not `wait_for`: on 3.11 it swallows a cancel that lands as the wake-up completes, and `stop()` then hangs.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
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
            "step_id": self._running["step_id"] if self._running is not None else None,
        }
        log.info("learner %s: step %d growing a candidate from %d samples", self.scenario, step, len(batch.samples))
        # One trace per step (when tracing is on): batch, train, evaluate and publish are its children.
        traced = tracing.span(
            "reef.learner.step", scenario=self.scenario, step=step, batch_id=batch.batch_id, samples=len(batch.samples)
        )
        try:
            with traced as step_span:
                try:
                    commit = await self._grow_judge_commit(step, batch, work_dir)
                except LostLeadership:
                    raise
                except Conflict as exc:
                    commit = await self._skip(step, batch, f"the head moved ({exc.message})", failed=False)
                    step_span.set(verdict=commit.verdict)
                    return commit
                except Exception as exc:
                    log.exception("learner %s: step %d failed", self.scenario, step)
                    commit = await self._skip(step, batch, f"{type(exc).__name__}: {exc}")
                    step_span.set(verdict=commit.verdict, error=f"{type(exc).__name__}: {exc}")
                    return commit
                self._step, self._failures, self._last_commit = step, 0, commit
                step_span.set(verdict=commit.verdict, release_id=commit.release_id, loss=commit.metrics.get("loss"))
                await self._consume(batch, step)
                return commit
        finally:
            self._job = {"state": "idle"}
            shutil.rmtree(work_dir, ignore_errors=True)

    async def _grow_judge_commit(self, step: int, batch: Batch, work_dir: Path) -> Commit:
        with tracing.span("reef.learner.batch", records=len(batch.record_ids), instruction=batch.instruction):
            head = await asyncio.to_thread(self.releases.head, self.scenario)
            parents = await asyncio.to_thread(self.lineage.parents, head)
            asked_from = self._running.get("release_id") if self._running is not None else None
            if asked_from is not None:  # a requested step may train from any release; it is judged against the head
                parents = StepParents(head, await asyncio.to_thread(self.releases.get, self.scenario, asked_from))
            trained_from = parents.trained_from
            parent_dir = await asyncio.to_thread(self.releases.materialize, trained_from) if trained_from else None
        self._job["trained_from"] = release_id_of(trained_from)
        ctx = GrowContext(
            self.scenario,
            step,
            work_dir,
            self.settings,
            self.engine,
            self.records,
            trained_from,
            self._progress,
            backend_factory=self._backend_factory,
            releases=self.releases,
        )
        with tracing.span("reef.learner.train", recipe=self.recipe.name, trained_from=release_id_of(trained_from)):
            candidate = await grow(self.recipe, batch, parent_dir, ctx, self._backend_factory)
        self._job["state"] = "evaluating"
        with tracing.span("reef.learner.evaluate") as evaluated:
            if self.gate.uses_tasks and not self.gate_tasks().size():  # only a policy that always accepts gets here
                metrics = dict(candidate.metrics)
                judgement = Judgement([], [], "accepted", "no gate tasks; policy always accepts", metrics)
            else:
                judgement = await judge(
                    self.evaluator, self._selector_for(batch), self.scenario, candidate.path, candidate.metrics, head
                )
            evaluated.set(outcome=judgement.outcome, tasks=len(judgement.candidate_scores))
        await self._check_leading(step)
        with tracing.span("reef.learner.publish", outcome=judgement.outcome):
            return await self._settlement.settle(step, batch, candidate, parents, judgement)

    def _selector_for(self, batch: Batch) -> Selector:
        """The recipe's `instruction_policy` for a step that carries an operator's instruction, else the scenario's."""
        policy = self.recipe.instruction_policy
        if batch.instruction and policy is not None:
            return load_selector(policy, self.settings)
        return self.selector

    async def _consume(self, batch: Batch, step: int) -> None:
        assert self._processor is not None
        try:
            await asyncio.to_thread(self.records.mark_consumed, batch.record_ids, step)
            self._processor.acknowledge(batch.batch_id)
        except Exception as exc:  # the commit log holds the ids: a resume marks them
            log.exception("learner %s: marking step %d consumed failed", self.scenario, step)
            self._error(step, f"marking records consumed failed: {type(exc).__name__}: {exc}")
            await asyncio.to_thread(self._resume)

    async def _check_leading(self, step: int) -> None:
        """Before anything is written to the shared stores: LostLeadership if another replica may learn now."""
        if self._leading is not None and not await self._leading():
            raise LostLeadership(f"this replica lost the learner lock of scenario {self.scenario!r} before step {step}")

    async def _skip(self, step: int, batch: Batch, reason: str, failed: bool = True) -> Commit:
        await self._check_leading(step)
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
            await self._decline(reason)
        assert self._last_commit is not None
        return self._last_commit.to_json()

    async def _decline(self, reason: str) -> None:
        """A `skipped` commit that trained nothing and consumes nothing, saying why."""
        await self._check_leading(self._step + 1)
        self._error(None, reason)
        commit = self._commit(self._step + 1, "skipped", None, NO_PARENTS, unjudged(reason), [])
        await asyncio.to_thread(self.commits.append, commit)
        self._step, self._last_commit = commit.step, commit

    async def _discard(self) -> None:
        """Commit what the processor dropped on its own (an sdpo grid spanning releases) as skipped, consuming it."""
        drain = getattr(self._processor, "discarded", None)
        for reason, record_ids in drain() if callable(drain) else []:
            await self._check_leading(self._step + 1)
            commit = self._commit(self._step + 1, "skipped", None, NO_PARENTS, unjudged(reason), record_ids)
            await asyncio.to_thread(self.commits.append, commit)
            await asyncio.to_thread(self.records.mark_consumed, record_ids, commit.step)
            self._step, self._last_commit = commit.step, commit

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

    def _publishing(self) -> None:
        self._job["state"] = "publishing"

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
        if self._running is not None:  # a requested step says which request it answers
            request = {key: self._running.get(key) for key in ("step_id", "text", "release_id")}
            judgement = dataclasses.replace(judgement, metrics={**judgement.metrics, "request": request})
        return judgement.commit(self.scenario, step, verdict, release, parents, consumed, self.lineage.tip_id, reason)

    def status(self) -> dict[str, Any]:
        """Step, buffered units, the job in flight, the last verdict with its scores, recent errors."""
        last = self._last_commit
        return {
            "mode": self._control.mode,
            **self.control(),
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
            "blocked": self._blocked or (self._feedback.blocker() if self._feedback is not None else None),
            "gate": self.gate.status(self._processor),
            "lineage": {"tip_release_id": self.lineage.tip_id},
            "consecutive_failures": self._failures,
            "errors": list(self._errors),
            **({"computed_feedback": self._feedback.status()} if self._feedback is not None else {}),
        }
