"""How a judged candidate ends a learner step: published (pending under review), kept as the lineage's tip, or
rejected — each written to the commit log, which is the step's commit point.

Publishing moves the head by compare-and-swap under the scenario's commit lock (shared with rollback and promote),
appends the commit, ends the working lineage and activates the release in the engine; a tie keeps the candidate as
the lineage's tip, the next step trains from it; a loss drops the lineage back to the serving release.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from reef.core.releases import Commit, Release, Verdict
from reef.learning.activity import StepActivity
from reef.learning.base import Batch
from reef.learning.growth import Candidate
from reef.learning.judgement import Judgement, release_id_of
from reef.learning.lineage import StepParents, WorkingLineage
from reef.learning.rollout.hooks import RolloutHooks
from reef.releases.base import CommitLog, ReleaseStore

log = logging.getLogger(__name__)

Activate = Callable[[str, Release], Awaitable[None]]


@dataclasses.dataclass
class Settlement:
    """Writes the end of one scenario's steps; the learner hands it each judged candidate."""

    scenario: str
    recipe_name: str
    review: bool
    releases: ReleaseStore
    commits: CommitLog
    lineage: WorkingLineage
    commit_lock: asyncio.Lock
    activate: Activate
    activity: StepActivity  # the step's state as the status shows it: publishing, and errors
    rollouts: RolloutHooks | None = None  # rollout mode `canary`: an accepted release opens a rollout

    async def settle(
        self, step: int, batch: Batch, candidate: Candidate, parents: StepParents, judgement: Judgement
    ) -> Commit:
        """The step's ending as its judgement says: published (or pending), kept as the lineage's tip, or rejected."""
        head = parents.head
        open_rollout = self.rollouts.open_on(self.scenario) if self.rollouts is not None else None
        if judgement.outcome == "accepted" and open_rollout is not None and head is not None:
            # No other release publishes while a rollout is open: the winner stays the lineage's tip.
            log.info("learner %s: step %d accepted, kept while rollout %s is open", self.scenario, step, open_rollout)
            held = dataclasses.replace(judgement, reason=f"{judgement.reason}; rollout {open_rollout} is open")
            return await self._keep(step, batch, candidate, parents, held)
        if judgement.outcome == "accepted":
            log.info("learner %s: step %d accepted: %s", self.scenario, step, judgement.reason)
            self.activity.publishing()
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
        tip_id = self.lineage.tip_id
        return judgement.commit(self.scenario, step, verdict, release, parents, consumed, tip_id, reason)

    async def _keep(
        self, step: int, batch: Batch, candidate: Candidate, parents: StepParents, judgement: Judgement
    ) -> Commit:
        """Store a candidate that did not lose as the lineage's new tip; the next step trains from it."""
        tip = await asyncio.to_thread(
            self.lineage.keep, candidate.path, parents, step, self.recipe_name, judgement.metrics, batch.record_ids
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
        # A candidate that adds code or commands to an agent's harness waits for a person, whatever the mode.
        review = self.review or bool(candidate.review)
        # Rollout mode `canary`: the release is stored unserved and earns its traffic in a rollout.
        canary = not review and self.rollouts is not None and self.rollouts.canary(self.scenario)
        head = parents.head
        async with self.commit_lock:
            release = await asyncio.to_thread(
                self.releases.publish,
                self.scenario,
                candidate.path,
                head.release_id if head is not None else None,
                operation="training",
                step=step,
                recipe=self.recipe_name,
                metrics=judgement.metrics,
                pending=review or canary,
                # The consumed ids ride along so a crash before the commit log can be rolled forward on resume.
                consumed_record_ids=batch.record_ids,
                trained_from=release_id_of(parents.trained_from),
            )
            verdict: Verdict = "pending" if review else "published"
            self.lineage.tip_id = None  # a published (or pending) candidate ends the lineage
            reason = None
            if canary:
                assert self.rollouts is not None
                rollout_id = await self.rollouts.begin(self.scenario, release, head)
                reason = f"{judgement.reason}; opened rollout {rollout_id}: serves a share of the traffic as the canary"
            commit = self._commit(step, verdict, release, parents, judgement, batch.record_ids, reason)
            await asyncio.to_thread(self.commits.append, commit)
            await asyncio.to_thread(self.lineage.end)
            if not review and not canary:
                try:
                    await self.activate(self.scenario, release)
                except Exception as exc:  # committed already: the head serves after the next start
                    log.exception("learner %s: activation of %s failed", self.scenario, release.release_id)
                    self.activity.error(step, f"activation failed: {type(exc).__name__}: {exc}")
        return commit
