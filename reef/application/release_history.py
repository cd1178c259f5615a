"""A scenario's release history as the release routes show and change it: the releases marked as they serve, and
rollback and promote, each a new release published under the scenario's commit lock."""

from __future__ import annotations

import asyncio
import logging

from reef.application.rollout import Rollouts
from reef.application.scenarios import Scenarios
from reef.core.errors import Conflict, NotFound
from reef.core.releases import Release, ReleaseOperation
from reef.core.views import ReleaseRow
from reef.releases.base import ReleaseStore

log = logging.getLogger(__name__)


class ReleaseHistory:
    """Reads and restores the releases of every scenario; the scenario is known to exist (the runtime checks)."""

    def __init__(self, releases: ReleaseStore, rollouts: Rollouts, scenarios: Scenarios) -> None:
        self.store = releases
        self.rollouts = rollouts
        self.scenarios = scenarios

    def releases(self, scenario: str) -> list[ReleaseRow]:
        """Every release of `scenario`, newest first, marking the serving one `current` and an open rollout's
        candidate `canary` (reads git: call it from a worker thread)."""
        head = self.store.head(scenario)
        current = head.release_id if head is not None else None
        canary = self.rollouts.open_candidate(scenario)
        return [
            ReleaseRow(release, release.release_id == current, release.release_id == canary)
            for release in self.store.list(scenario)
        ]

    async def release(self, scenario: str, release_id: str | None) -> Release:
        """The release `release_id` of `scenario`, or its serving one when None; NotFound if there is none."""
        if release_id is not None:
            return await asyncio.to_thread(self.store.get, scenario, release_id)
        head = await asyncio.to_thread(self.store.head, scenario)
        if head is None:
            raise NotFound(f"scenario {scenario!r} has no release yet")
        return head

    async def restore(self, scenario: str, release_id: str, operation: ReleaseOperation) -> Release:
        """Serve `release_id` again (`rollback`) or a pending one (`promote`), as a new release; Conflict when the
        operation does not fit the release, or while a rollout is open."""
        store = self.store
        self.rollouts.require_none_open(scenario, operation)
        async with self.scenarios.commit_lock(scenario):
            self.rollouts.require_none_open(scenario, operation)
            target = await asyncio.to_thread(store.get, scenario, release_id)
            head = await asyncio.to_thread(store.head, scenario)
            if operation == "promote" and not target.pending:
                raise Conflict(f"release {release_id} is not pending; only pending releases can be promoted")
            if operation == "rollback" and target.pending:
                raise Conflict(f"release {release_id} is pending; promote it instead")
            if operation == "rollback" and head is not None and head.release_id == release_id:
                raise Conflict(f"release {release_id} is already serving")
            if operation == "promote" and self.rollouts.canary(scenario):
                # Rollout mode canary: a reviewed release earns its traffic in a rollout, as a gate winner does.
                await self.rollouts.begin(scenario, target, head)
                return target
            release = await asyncio.to_thread(store.republish, scenario, release_id, operation)
            await self.scenarios.published(scenario, release)
        log.info("runtime: %s %s of %s → %s", scenario, operation, release_id, release.release_id)
        return release
