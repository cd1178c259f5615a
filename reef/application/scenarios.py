"""Every scenario's life in this process: brought up (a base release published if it has none, its head served),
learned by this replica's learner while this replica leads it, kept serving the head other replicas publish, and
deleted (its records and release refs archived).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path

from reef.application.replica import Replica
from reef.application.serving import ServingContexts
from reef.coordination.election import Election
from reef.coordination.hints import ReleaseHints
from reef.core.errors import Conflict, Forbidden, NotFound
from reef.core.releases import Release
from reef.learning.learner import Learner
from reef.learning.services import LearningServices
from reef.storage.base import ScenarioInfo

log = logging.getLogger(__name__)


class Scenarios:
    """The live scenarios and their learners; this replica's part among the replicas that share the stores."""

    def __init__(
        self, services: LearningServices, *, serving: ServingContexts, election: Election, hints: ReleaseHints
    ) -> None:
        self.services = services
        self.settings = settings = services.settings
        self.records = services.records
        self.release_store = services.releases
        self.recipe = services.recipe
        self.learns = services.learns
        self.gate = services.gate
        self.serving = serving
        self.engine = serving.engine  # the serving engine: activations and what each scenario serves now
        self.known: set[str] = set()
        self.learners: dict[str, Learner] = {}
        self._creation_locks: dict[str, asyncio.Lock] = {}
        self._admission = asyncio.Lock()  # one new scenario counted and stored at a time (reef.max_scenarios)
        self._commit_locks: dict[str, asyncio.Lock] = {}
        # Among replicas sharing the stores: one learner per scenario by election, serving releases kept current.
        self.replica = Replica(
            election,
            hints,
            election_timeout_s=settings.learning.election_timeout_s,
            release_poll_s=settings.storage.release_poll_s,
            scenarios=lambda: sorted(self.known),
            lead=self._lead,
            follow=self._follow,
            sync=self._sync,
            elects=self.learns,
        )

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> list[ScenarioInfo]:
        """Serve each live scenario's head release, then start (and resume) its learner; the live scenarios."""
        scenarios = await asyncio.to_thread(self.records.scenarios)
        # A distillation teacher release must exist before anything trains on it.
        await asyncio.to_thread(
            self.recipe.extensions().check_teacher, self.release_store, [info.name for info in scenarios]
        )
        for info in scenarios:
            await self._bring_up(info.name)
        self.replica.start()
        return scenarios

    async def stop(self) -> None:
        """Stop every learner (unacknowledged batches are retried at the next start), then give up its locks."""
        await self.replica.stop_loops()
        learners, self.learners = list(self.learners.values()), {}
        await asyncio.gather(*(learner.stop() for learner in learners), return_exceptions=True)
        await self.replica.close()

    async def _bring_up(self, name: str) -> None:
        head = await asyncio.to_thread(self.release_store.head, name)
        if head is None:
            head = await self._publish_base(name)
        await self.serving.activate(name, head)
        self.known.add(name)
        if self.learns:
            await self.replica.elect(name)

    async def _lead(self, name: str) -> None:
        """This replica won the election of `name`: start its learner (resuming from the shared stores)."""
        if name not in self.learners:
            learner = self._new_learner(name)
            self.learners[name] = learner
            await learner.start()

    async def _follow(self, name: str) -> None:
        """This replica lost the lock of `name`: stop its learner (its unfinished batch stays unconsumed)."""
        learner = self.learners.pop(name, None)
        if learner is not None:
            await learner.stop()

    async def _sync(self, name: str) -> None:
        """Serve `name`'s head release if another replica moved it; `""`: every scenario, and bring up the
        scenarios created elsewhere."""
        if not name:  # every scenario: one look at the release store for all heads
            live = {info.name for info in await asyncio.to_thread(self.records.scenarios)}
            for created in sorted(live - self.known):
                await self.ensure(created)
            for deleted in sorted(self.known - live):
                # Read again: one created here since the listing above is live.
                if await asyncio.to_thread(self.records.scenario, deleted) is None:
                    await self._forget(deleted)
            heads = await asyncio.to_thread(self.release_store.head_ids, sorted(self.known))
            for scenario, head_id in heads.items():
                if head_id is not None and head_id != self.engine.active_release_id(scenario):
                    await self._sync(scenario)
            return
        head = await asyncio.to_thread(self.release_store.head, name)
        if head is None or head.release_id == self.engine.active_release_id(name):
            return
        async with self.commit_lock(name):
            head = await asyncio.to_thread(self.release_store.head, name)
            if head is not None and name in self.known and head.release_id != self.engine.active_release_id(name):
                await self.serving.activate(name, head)
                log.info("runtime: %s now serves %s (published by another replica)", name, head.release_id)

    async def published(self, scenario: str, release: Release) -> None:
        """Serve a release this replica just published, and hint the other replicas to do the same."""
        await self.serving.activate(scenario, release)
        await asyncio.to_thread(self.replica.announce, scenario)

    def _new_learner(self, name: str) -> Learner:
        return Learner(
            name,
            self.services,
            activate=self.published,
            commit_lock=self.commit_lock(name),
            leading=lambda: self.replica.holds(name),
        )

    def commit_lock(self, scenario: str) -> asyncio.Lock:
        """Held around every head move and activation of `scenario` (learner steps, rollback, promote, sync)."""
        return self._commit_locks.setdefault(scenario, asyncio.Lock())

    # ---- creation and deletion -------------------------------------------------------------------------------

    async def ensure(self, name: str, release_id: str | None = None) -> tuple[ScenarioInfo, bool]:
        """Create the scenario (records + base release, activated) if absent; `(info, created)`.

        Safe under many concurrent first requests for one name: one creates, the others wait and find it.
        `release_id`, when given, must name a release of the scenario (NotFound otherwise).
        """
        created = False
        if name not in self.known:
            lock = self._creation_locks.setdefault(name, asyncio.Lock())
            try:
                async with lock:
                    if name not in self.known:
                        async with self._admission:
                            await self._check_room(name)
                            _, created = await asyncio.to_thread(self.records.ensure_scenario, name, self.recipe.name)
                        await self._bring_up(name)
            finally:
                # Waiters hold their own reference; later calls take the fast path (or, refused, leave nothing).
                self._creation_locks.pop(name, None)
        info = await asyncio.to_thread(self.records.scenario, name)
        if info is None:  # deleted concurrently
            raise NotFound(f"scenario {name!r} does not exist")
        if release_id is not None:
            await asyncio.to_thread(self.release_store.get, name, release_id)
        return info, created

    async def _check_room(self, name: str) -> None:
        """Forbidden, naming `reef.max_scenarios`, when `name` would be one scenario more than the deployment keeps
        (a scenario the store already has, created by another replica, always comes up)."""
        if await asyncio.to_thread(self.records.scenario, name) is not None:
            return
        limit = self.settings.reef.max_scenarios
        # The store counts the scenarios of every replica; this replica's own count already refuses at the limit.
        live = len(self.known) if len(self.known) >= limit else len(await asyncio.to_thread(self.records.scenarios))
        if live >= limit:
            raise Forbidden(
                f"cannot create scenario {name!r}: this deployment keeps at most {limit} scenarios "
                f"(reef.max_scenarios); delete one or raise reef.max_scenarios"
            )

    async def _publish_base(self, name: str) -> Release:
        directory = Path(tempfile.mkdtemp(prefix="reef-seed-"))
        try:
            await asyncio.to_thread(self.recipe.extensions().seed, directory)
            try:
                return await asyncio.to_thread(
                    self.release_store.publish, name, directory, None, operation="creation", recipe=self.recipe.name
                )
            except Conflict:  # another replica created it first
                head = await asyncio.to_thread(self.release_store.head, name)
                if head is None:
                    raise
                return head
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    async def delete(self, name: str) -> None:
        """Archive the scenario's records and release refs and stop its learner; NotFound if unknown."""
        if await asyncio.to_thread(self.records.scenario, name) is None:
            raise NotFound(f"scenario {name!r} does not exist")
        await self._stop_learning(name)
        async with self.commit_lock(name):
            await asyncio.to_thread(self.gate.store.clear, name)
            await asyncio.to_thread(self.records.archive_scenario, name)
            await asyncio.to_thread(self.release_store.archive, name)
            await self.engine.activate(name, None, None)
        self.serving.forget(name)

    async def _forget(self, name: str) -> None:
        """Another replica deleted `name`: stop learning and serving it here."""
        await self._stop_learning(name)
        async with self.commit_lock(name):
            await self.engine.activate(name, None, None)
        self.serving.forget(name)
        log.info("runtime: scenario %s was deleted by another replica", name)

    async def _stop_learning(self, name: str) -> None:
        self.known.discard(name)
        learner = self.learners.pop(name, None)
        if learner is not None:
            await learner.stop()
        await self.replica.resign(name)
