"""Each scenario's live rollout: which arm serves a request, the open rollouts every replica routes by, and (on the
scenario's learner replica) reading the evidence, applying the sequential test and ending the rollout.

The state is the record store's rollout row (`RecordStore.rollout`): the learner replica writes it by
compare-and-swap, every replica reads it every `rollout.check_interval_s` and routes by it, and a restart
resumes from it. Assignment is a hash of the sticky key and the rollout id, so replicas agree with no messages.
A promotion moves the head as any promote does (the other replicas follow the head); a rollback leaves the
incumbent serving and the candidate stored, pending. The commit log gets the decision with its statistics as
the learner's next step (`Learner.record_outcome`), once no step runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Literal

from reef.application.config import ConfigError
from reef.application.serving import ServingContexts
from reef.core.errors import BadRequest, Conflict
from reef.core.releases import Release
from reef.core.settings import RolloutSettings, Settings
from reef.core.views import RolloutView
from reef.inference.base import RequestContext
from reef.learning.base import Recipe
from reef.learning.learner import Learner
from reef.learning.rollout import evidence
from reef.learning.rollout.assignment import Arm, arm_of, assignment_key
from reef.learning.rollout.policy import Ending, ending
from reef.learning.rollout.state import NO_ROLLOUT, Rollout
from reef.releases.base import ReleaseStore
from reef.storage.base import RecordStore, RolloutRow

log = logging.getLogger(__name__)

RolloutMode = Literal["immediate", "canary"]
_PAGE_RECORDS = 1000


def check_rollout(settings: Settings, recipe: type[Recipe] | Recipe) -> None:
    """Refuse `rollout.mode canary` where it cannot work (`canary_refusal`): a ConfigError (exit 2) naming it."""
    why = canary_refusal(settings, recipe) if settings.rollout.mode == "canary" else None
    if why is not None:
        raise ConfigError(f"rollout.mode: canary is not available here: {why}")


def canary_refusal(settings: Settings, recipe: type[Recipe] | Recipe) -> str | None:
    """Why rollout mode `canary` cannot work here, or None: a recipe that publishes no trained release, weights on
    an engine that serves one model whatever the release, a harness an agent pulls as files (Reef must choose
    the release per request)."""
    return recipe.surface.canary_refusal(settings, settings.learning.recipe)


class Rollouts:
    """Every scenario's rollout on this replica: routing from memory, state from the record store."""

    def __init__(
        self,
        settings: Settings,
        records: RecordStore,
        releases: ReleaseStore,
        serving: ServingContexts,
        *,
        leads: Callable[[str], bool],
        learner_of: Callable[[str], Learner | None],
        commit_lock: Callable[[str], asyncio.Lock],
        published: Callable[[str, Release], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.config: RolloutSettings = settings.rollout
        self.records = records
        self.releases = releases
        self.serving = serving
        self._leads = leads
        self._learner_of = learner_of
        self._commit_lock = commit_lock
        self._published = published
        self._open: dict[str, Rollout] = {}  # scenario -> its open rollout (the routing table)
        self._modes: dict[str, str | None] = {}
        self._task: asyncio.Task[None] | None = None

    # ---- the hot path ----------------------------------------------------------------------------------------

    def route(self, scenario: str, pinned: str | None, tags: Mapping[str, str]) -> tuple[RequestContext, str | None]:
        """The request's context and the id of the rollout that chose it (None: no open rollout, or a pin)."""
        rollout = self._open.get(scenario) if pinned is None else None
        if rollout is None:
            return self.serving.context_for(scenario, pinned), None
        arm = arm_of(assignment_key(tags), rollout.rollout_id, rollout.share)
        release_id = rollout.candidate_release_id if arm == "candidate" else None
        return self.serving.context_for(scenario, release_id), rollout.rollout_id

    def arm_served(self, scenario: str, rollout_id: str, ctx: RequestContext) -> Arm | None:
        """Which arm `ctx` is in rollout `rollout_id` (None: that rollout is no longer open here)."""
        rollout = self._open.get(scenario)
        if rollout is None or rollout.rollout_id != rollout_id:
            return None
        return rollout.arm_of_release(ctx.release_id)

    async def failed(self, scenario: str, rollout_id: str, ctx: RequestContext) -> None:
        """A request the rollout routed failed (5xx, timeout): count it for its arm (best effort)."""
        arm = self.arm_served(scenario, rollout_id, ctx)
        if arm is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.records.count_rollout_error, rollout_id, arm)

    # ---- the settlement's hooks (RolloutHooks) -------------------------------------------------------------

    def open_on(self, scenario: str) -> str | None:
        rollout = self._open.get(scenario)
        return rollout.rollout_id if rollout is not None else None

    def open_candidate(self, scenario: str) -> str | None:
        """The release the scenario's open rollout serves as its canary, or None."""
        rollout = self._open.get(scenario)
        return rollout.candidate_release_id if rollout is not None else None

    def mode(self, scenario: str) -> str:
        """The scenario's rollout mode: its own, else the deployment's."""
        return self._modes.get(scenario) or self.config.mode

    def canary(self, scenario: str) -> bool:
        return self.mode(scenario) == "canary"

    async def begin(self, scenario: str, candidate: Release, incumbent: Release | None) -> str:
        """Open a rollout of `candidate` (a stored, pending release) against `incumbent` (the serving head)."""
        row = await asyncio.to_thread(self.records.rollout, scenario)
        if row.document is not None and Rollout.from_json(row.document).is_open:
            raise Conflict(f"scenario {scenario!r} has an open rollout {row.document['rollout_id']}")
        counts = await asyncio.to_thread(self.records.counts, scenario)
        rollout = Rollout.open(
            scenario,
            candidate.release_id,
            incumbent.release_id if incumbent is not None else None,
            self.config.canary_share,
            self.config.alpha,
            counts.last_sequence,
        )
        if not await asyncio.to_thread(self.records.put_rollout, scenario, rollout.to_json(), row.version):
            raise Conflict(f"the rollout of scenario {scenario!r} changed concurrently")
        self._open[scenario] = rollout
        log.info(
            "rollout %s of %s: %s as canary at share %g",
            rollout.rollout_id,
            scenario,
            candidate.release_id,
            rollout.share,
        )
        return rollout.rollout_id

    # ---- operators -------------------------------------------------------------------------------------------

    def view(self, scenario: str) -> RolloutView:
        """The scenario's open or last rollout as the API shows it (read from the shared store)."""
        row = self.records.rollout(scenario)
        if row.document is None:
            return NO_ROLLOUT.copy()
        return Rollout.from_json(row.document).view(self.config.score_min, self.config.score_max)

    def views(self, scenarios: Collection[str]) -> dict[str, RolloutView]:
        """The rollout view of each of `scenarios` that ever had one (one read of the store)."""
        rows = self.records.rollouts()
        return {
            name: Rollout.from_json(row.document).view(self.config.score_min, self.config.score_max)
            for name, row in rows.items()
            if name in scenarios and row.document is not None
        }

    async def set_mode(self, scenario: str, mode: str) -> None:
        """Store the scenario's rollout mode; BadRequest naming `rollout_mode` where canary cannot work."""
        why = canary_refusal(self.settings, self.serving.recipe) if mode == "canary" else None
        if why is not None:
            raise BadRequest(f"canary is not available here: {why}", field="rollout_mode")
        await asyncio.to_thread(self.records.set_rollout_mode, scenario, mode)
        self._modes[scenario] = mode

    async def act(self, scenario: str, action: str) -> RolloutView:
        """An operator's `promote` or `rollback` of the open rollout; Conflict when none is open."""
        if action not in ("promote", "rollback"):
            raise BadRequest("must be promote or rollback", field="action")
        row = await asyncio.to_thread(self.records.rollout, scenario)
        rollout = Rollout.from_json(row.document) if row.document is not None else None
        if rollout is None or not rollout.is_open:
            raise Conflict(f"scenario {scenario!r} has no open rollout")
        decision: Literal["promote", "rollback"] = "promote" if action == "promote" else "rollback"
        await self._end(scenario, rollout, row.version, Ending(decision, "operator", f"{action} by an operator"))
        return self.view(scenario)

    def require_none_open(self, scenario: str, what: str) -> None:
        """Conflict naming the open rollout, for what may not happen while one is (release moves, train steps)."""
        rollout_id = self.open_on(scenario)
        if rollout_id is not None:
            raise Conflict(
                f"scenario {scenario!r} has an open rollout {rollout_id}: {what} waits until it ends "
                f"(or end it: POST /reef/scenarios/{scenario}/rollout)"
            )

    # ---- the loop ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="reef-rollouts")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("rollout check failed")
            await asyncio.sleep(self.config.check_interval_s)

    async def sync(self, rows: Mapping[str, RolloutRow] | None = None) -> None:
        """Read every scenario's rollout row (or take `rows`): the open rollouts to route by, the rollout modes."""
        if rows is None:
            rows = await asyncio.to_thread(self.records.rollouts)
        self._modes = {name: row.mode for name, row in rows.items()}
        found = {name: Rollout.from_json(row.document) for name, row in rows.items() if row.document is not None}
        self._open = {name: rollout for name, rollout in found.items() if rollout.is_open}

    async def tick(self) -> None:
        """One round: sync from the store, then check each rollout this replica's learner leads."""
        rows = await asyncio.to_thread(self.records.rollouts)
        await self.sync(rows)
        for scenario, row in rows.items():
            if row.document is None or not self._leads(scenario):
                continue
            rollout = Rollout.from_json(row.document)
            if rollout.is_open:
                await self.check(scenario, rollout, row.version)
            elif rollout.state == "promoted" and rollout.release_id is None:  # a crash cut a promotion short
                async with self._commit_lock(scenario):
                    await self._serve_promoted(scenario, rollout, row.version)
            elif not rollout.logged:
                await self._log(scenario, rollout, row.version)

    async def check(self, scenario: str, rollout: Rollout, version: int) -> None:
        """Count the evidence since the cursor, and end the rollout when its ending is due."""
        head = await asyncio.to_thread(self.releases.head, scenario)
        if head is not None and head.release_id != rollout.incumbent_release_id:
            # The head moved under the rollout (a crash between a promotion and its row, or a hand edit).
            candidate = await asyncio.to_thread(self._content_of, scenario, rollout.candidate_release_id)
            promoted = head.content_id == candidate
            decision: Literal["promote", "rollback"] = "promote" if promoted else "rollback"
            reason = f"the head moved to {head.release_id} while the rollout was open"
            ended = dataclasses.replace(
                rollout,
                state="promoted" if promoted else "rolled_back",
                decision=decision,
                decided_by="operator",
                reason=reason,
                ended_at=time.time(),
                release_id=head.release_id,
            )
            await self._write_end(scenario, ended, version)
            return
        counted = await asyncio.to_thread(self._counted, scenario, rollout)
        end = ending(counted, self.config, time.time())
        if end is not None:
            await self._end(scenario, counted, version, end)
        elif counted != rollout:
            await asyncio.to_thread(self.records.put_rollout, scenario, counted.to_json(), version)

    def _counted(self, scenario: str, rollout: Rollout) -> Rollout:
        """`rollout` with the evidence of every record after its cursor and the shared error counts (blocking)."""
        counted = rollout
        while page := self.records.page(scenario, counted.cursor, _PAGE_RECORDS):
            cited = functools.partial(self.records.get_many, scenario)  # receipts resolve within the scenario
            counted = evidence.count(counted, page, cited, self.config.score_min, self.config.score_max)
        return evidence.with_errors(counted, self.records.rollout_errors(rollout.rollout_id))

    def _content_of(self, scenario: str, release_id: str) -> str | None:
        try:
            return self.releases.get(scenario, release_id).content_id
        except Exception:
            return None

    async def _end(self, scenario: str, rollout: Rollout, version: int, end: Ending) -> None:
        """Carry out `end`. The decision is written first (compare-and-swap: of two replicas ending one rollout,
        one wins); then a promotion moves the head, as any promote does, and names the release that serves."""
        async with self._commit_lock(scenario):
            row = await asyncio.to_thread(self.records.rollout, scenario)
            if row.version != version:  # ended or counted by another replica meanwhile: the next round sees it
                return
            promoted = end.decision == "promote"
            ended = dataclasses.replace(
                rollout,
                state="promoted" if promoted else "rolled_back",
                decision=end.decision,
                decided_by=end.decided_by,
                reason=end.reason,
                ended_at=time.time(),
                release_id=None if promoted else rollout.incumbent_release_id,
            )
            await self._write_end(scenario, ended, version)

    async def _write_end(self, scenario: str, ended: Rollout, version: int) -> None:
        if not await asyncio.to_thread(self.records.put_rollout, scenario, ended.to_json(), version):
            return
        self._open.pop(scenario, None)
        log.info("rollout %s of %s: %s (%s)", ended.rollout_id, scenario, ended.state, ended.reason)
        if ended.state == "promoted" and ended.release_id is None:
            await self._serve_promoted(scenario, ended, version + 1)
        else:
            await self._log(scenario, ended, version + 1)

    async def _serve_promoted(self, scenario: str, ended: Rollout, version: int) -> None:
        """Move the head to the promoted canary (unless a crash left it moved already) and name what serves."""
        head = await asyncio.to_thread(self.releases.head, scenario)
        if head is not None and head.release_id == ended.incumbent_release_id:
            head = await asyncio.to_thread(self.releases.republish, scenario, ended.candidate_release_id, "promote")
        if head is None:
            return
        await self._published(scenario, head)
        served = dataclasses.replace(ended, release_id=head.release_id)
        if await asyncio.to_thread(self.records.put_rollout, scenario, served.to_json(), version):
            await self._log(scenario, served, version + 1)

    async def _log(self, scenario: str, rollout: Rollout, version: int) -> None:
        """Write the decision with its statistics to the commit log (once no learner step runs)."""
        learner = self._learner_of(scenario)
        if learner is None:
            return
        statistics = rollout.statistics(self.config.score_min, self.config.score_max)
        metrics = {"rollout": {"rollout_id": rollout.rollout_id, "decided_by": rollout.decided_by, **statistics}}
        promoted = rollout.decision == "promote"
        commit = await learner.record_outcome(
            "published" if promoted else "rejected",
            f"rollout {rollout.rollout_id}: {'promoted' if promoted else 'rolled back'}: {rollout.reason}",
            rollout.release_id if promoted else rollout.candidate_release_id,
            rollout.incumbent_release_id,
            metrics,
        )
        if commit is not None:
            logged = dataclasses.replace(rollout, logged=True)
            await asyncio.to_thread(self.records.put_rollout, scenario, logged.to_json(), version)
