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
(the batch is retried with backoff) until it has failed `MAX_ATTEMPTS` times in a row, then consumes it. The
learner decides when a step runs and on what; one step, to its commit, is `steps`; its status view, `activity`.
"""

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from reef.core.errors import BadRequest, Conflict
from reef.core.payloads import ControlState, LearnerStatus
from reef.core.records import Record
from reef.core.releases import Commit, Verdict
from reef.core.views import StepQueued
from reef.learning.activity import StepActivity, commit_summary
from reef.learning.base import Batch, Processor
from reef.learning.budget import usage_tokens
from reef.learning.control import TrainingControl
from reef.learning.evaluation.tasks import GateTasks
from reef.learning.gate import ScenarioGate
from reef.learning.lineage import WorkingLineage
from reef.learning.recovery import feed_new, resume
from reef.learning.services import LearningServices
from reef.learning.settlement import Activate
from reef.learning.steps import LostLeadership, Steps

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0


class Learner:
    """Turns one scenario's records into releases: a background task that steps as its training mode says."""

    def __init__(
        self,
        scenario: str,
        services: LearningServices,
        *,
        activate: Activate,
        commit_lock: asyncio.Lock,
        leading: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.scenario = scenario
        self.budget = services.budget
        self.recipe = recipe = services.recipe
        self.settings = settings = services.settings
        self.records = records = services.records
        self.releases = services.releases
        self.commits = services.commits
        self.engine = services.engine
        self.evaluator = evaluator = services.evaluator
        self.selector = selector = services.selector
        self.gate = ScenarioGate(scenario, services.gate, evaluator.uses_gate_tasks, not selector.needs_scores)
        self.lineage = WorkingLineage(scenario, services.releases)
        self._activity = StepActivity(scenario)
        self._steps = Steps(
            scenario,
            services,
            gate=self.gate,
            lineage=self.lineage,
            activity=self._activity,
            activate=activate,
            commit_lock=commit_lock,
            leading=leading,
        )
        self._step_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._processor: Processor | None = None
        self._cursor = 0
        # The cursor as of the loop's last decision: every record through it was looked at and started no step
        # (or its step committed). Lets operators and tests tell "not seen yet" from "seen, nothing to do".
        self._considered = 0
        self._control = TrainingControl(scenario, records, settings.learning.mode)
        # Feedback computed from traffic (openclawrl's judge): runs beside the loop, its verdicts become records.
        self._feedback = recipe.extensions().feedback_source(scenario)
        budget = services.budget
        if self._feedback is not None and budget.max_tokens_per_hour:
            self._feedback.meter(lambda usage: budget.spend(scenario, usage_tokens(usage)))
        self._feedback_task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume from the stores (its training control included) and start the background loop."""
        try:
            await asyncio.to_thread(self._resume)
            await asyncio.to_thread(self._control.resume, self._request_committed)
        except Exception as exc:  # serve anyway; the loop (or the next step) retries the resume
            log.exception("learner %s: resume failed", self.scenario)
            self._activity.error(None, f"resume failed: {type(exc).__name__}: {exc}")
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

    def control(self) -> ControlState:
        """The training mode, whether learning is paused, and the requested step (queued or running) if any."""
        return self._control.state(self._activity.job.get("step_id"))

    async def set_control(self, training_mode: str | None = None, paused: bool | None = None) -> ControlState:
        """Change the training mode and/or pause or resume learning (stored first, then in effect)."""
        await self._control.set(training_mode, paused)
        mode, paused_now = self._control.mode, self._control.paused
        log.info("learner %s: training_mode %s%s", self.scenario, mode, ", paused" if paused_now else "")
        self.wake()
        return self.control()

    async def request_step(self, text: str | None = None, release_id: str | None = None) -> StepQueued:
        """Queue one step now (POST /reef/train): it trains on what is ready, hands `text` to the recipe and, with
        `release_id`, trains from that release; it is judged against the serving release as any step is.

        Conflict while learning is paused, in training mode `auto`, while a step is queued or running, or when
        there is nothing to train on; NotFound for an unknown release.
        """
        async with self._control.lock:
            self._control.check_requestable()
            if self._activity.job["state"] != "idle":
                raise Conflict(f"step {self._activity.job.get('step')} of scenario {self.scenario!r} is running")
            if release_id is not None:
                await asyncio.to_thread(self.releases.get, self.scenario, release_id)  # NotFound names it
            # Queued under the step lock: an auto step waiting for it then sees the request and leaves it the units.
            async with self._step_lock:
                await self._pull()
                assert self._processor is not None
                if self._processor.ready() == 0 and self.recipe.gate().takes_instructions and not text:
                    raise BadRequest(
                        f"scenario {self.scenario!r} has no ready units: a step of recipe {self.recipe.name} "
                        "needs an instruction to work from",
                        field="text",
                    )
                if self._processor.ready() == 0 and not (text and self.recipe.gate().takes_instructions):
                    raise Conflict(
                        f"nothing to train on: scenario {self.scenario!r} has no ready units "
                        f"(recipe {self.recipe.name} needs reports to train on)"
                    )
                request = await self._control.queue(text, release_id)
        log.info("learner %s: step %s requested", self.scenario, request["step_id"])
        self.wake()
        return {
            "step_id": request["step_id"],
            "text": request["text"],
            "release_id": request["release_id"],
            "requested_at": request["requested_at"],
            "scenario": self.scenario,
            "state": "queued",
        }

    async def record_outcome(
        self, verdict: Verdict, reason: str, release_id: str | None, parent_release_id: str | None, metrics: dict
    ) -> Commit | None:
        """Append a commit no step made (a rollout's decision) as the next step; None while a step runs (the
        caller tries again later: step numbers stay in order)."""
        if self._step_lock.locked():
            return None
        async with self._step_lock:
            return await self._steps.record_outcome(verdict, reason, release_id, parent_release_id, metrics)

    def _request_committed(self, step_id: str) -> bool:
        last = self._steps.last_commit
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
                if batch is None and blocker is None and text and self.recipe.gate().takes_instructions:
                    batch = Batch(f"batch_{uuid.uuid4().hex}", [], [])
                self._steps.request = request
                try:
                    if batch is None:
                        await self._steps.decline(blocker or "nothing to train on: no ready units")
                    else:
                        await self._run_step(dataclasses.replace(batch, instruction=text))
                finally:
                    self._steps.request = None
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
        """Why no step may start now: the upstream budget is spent, the feedback source is down, or the gate cannot
        judge."""
        assert self._processor is not None
        spent = self.budget.blocker(self.scenario) if self.budget is not None else None
        if spent is not None:
            return spent
        refused = self.evaluator.blocker()
        if refused is not None:
            return refused
        held = self._feedback.blocker() if self._feedback is not None else None
        return held or self.gate.blocker(self._processor)

    # ---- stepping --------------------------------------------------------------------------------------------

    async def step(self) -> dict[str, Any] | None:
        """Run one step now if a batch can be built; the step's commit as JSON, or None if nothing was ready."""
        async with self._step_lock:
            await self._pull()
            await self._steps.discard(self._processor)
            assert self._processor is not None
            # A step asked for (POST /reef/train) while this one waited for the lock takes the ready units itself.
            if self._processor.ready() == 0 or self._control.request is not None:
                return None
            blocker = self._blocker()
            if blocker is not None:
                return await self._steps.block(blocker)
            self._steps.blocked = None
            batch = self._processor.build_batch()
            if batch is None:
                return None
            return (await self._run_step(batch)).to_json()

    async def _run_step(self, batch: Batch) -> Commit:
        """Run a step on `batch` to its commit; a step that leaves the processor behind the stores (a skipped step
        retries its batch, a failed acknowledgement) is followed by a fresh processor from the stores."""
        assert self._processor is not None
        ended = await self._steps.run(batch, self._processor)
        if ended.resume:
            await asyncio.to_thread(self._resume)
        return ended.commit

    async def regate(self) -> None:
        """The scenario's own tasks changed: rebuild the processor with the held-out split they call for."""
        async with self._step_lock:
            await asyncio.to_thread(self._resume)
            self._steps.blocked = None
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
                    async with self._step_lock:  # a step asked for by hand pulls too: one reader at a time
                        await self._pull()  # buffered for a requested step; the judge works on them in any mode
                        self._considered = self._cursor
                    await self._sleep(poll_s)
                    continue
                await self._pull()
                async with self._step_lock:
                    await self._steps.discard(self._processor)
                assert self._processor is not None
                still_blocked = self._steps.blocked is not None and self._blocker() is not None
                # A processor may count units coarser than samples (grpo: whole groups); it says how many make a batch.
                needed = self._processor.units_per_batch or batch_size
                if self._processor.ready() >= needed and not still_blocked and await self.step() is not None:
                    if self._steps.failures:
                        await self._sleep(min(poll_s * 2**self._steps.failures, MAX_BACKOFF_S))
                    continue  # another batch may be ready already
                self._considered = self._cursor
            except asyncio.CancelledError:
                raise
            except LostLeadership as exc:  # another replica learns this scenario now; nothing here was written
                log.warning("learner %s: %s; stopping", self.scenario, exc.message)
                self._activity.error(None, exc.message)
                return
            except Exception as exc:  # never let the loop die: the server keeps serving
                log.exception("learner %s: loop error", self.scenario)
                self._activity.error(None, f"{type(exc).__name__}: {exc}")
            await self._sleep(poll_s)

    async def _sleep(self, seconds: float) -> None:
        # Not `wait_for`: on 3.11 it swallows a cancel that lands as the wake-up completes, and `stop()` then hangs.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

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
        self.gate.serving(self.releases.head(self.scenario))
        self.lineage.tip_id = resumed.lineage_id
        self._steps.step = max(resumed.last_step, self._steps.step)
        self._steps.last_commit = resumed.last_commit

    async def _pull(self) -> None:
        """Feed records appended since the last look to the processor."""
        if self._processor is None:
            await asyncio.to_thread(self._resume)
            return
        self._cursor = await feed_new(self.records, self.scenario, self._processor, self._cursor)

    # ---- status ----------------------------------------------------------------------------------------------

    def status(self) -> LearnerStatus:
        """Step, buffered units, the job in flight, the last verdict with its scores, recent errors."""
        steps, control = self._steps, self.control()
        status: LearnerStatus = {
            "mode": self._control.mode,
            "training_mode": control["training_mode"],
            "paused": control["paused"],
            "requested": control["requested"],
            "step": steps.step,
            "ready": self._processor.ready() if self._processor is not None else 0,
            "batch_size": self.settings.learning.batch_size,
            "records_seen": self._cursor,
            "records_considered": self._considered,
            "skipped": self._processor.skipped_counts() if self._processor is not None else {},
            "job": dict(self._activity.job),
            "recent_losses": list(self._activity.losses),
            "last_commit": commit_summary(steps.last_commit),
            "blocked": steps.blocked or (self._feedback.blocker() if self._feedback is not None else None),
            "gate": self.gate.status(self._processor),
            "lineage": {"tip_release_id": self.lineage.tip_id},
            "consecutive_failures": steps.failures,
            "errors": list(self._activity.errors),
        }
        if self._feedback is not None:
            status["computed_feedback"] = self._feedback.status()
        return status
