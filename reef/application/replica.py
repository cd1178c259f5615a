"""This replica among others sharing the stores: which scenarios it learns, and keeping its serving releases current.

Two background loops of the `Runtime`:
- **election** (every `learning.election_timeout_s / 3`): for each live scenario, a follower tries to take the
  learner's lock and, on winning, starts the learner (which resumes from the shared stores: the records its
  predecessor did not consume, its commit log); a leader checks that it still holds the lock and, if not, stops its
  learner. The learner itself checks again right before each publish (`Learner(leading=…)`), so a leader that lost
  its lock stops before its next publish.
- **release sync** (every `storage.release_poll_s`, and at once on a hint from another replica): reads each
  scenario's head from the release store and activates it when it is not the one serving; picks up scenarios that
  another replica created.
With `SoleElection` and no hints (one process), both loops cost a timer and a head read per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from reef.coordination.election import Election
from reef.coordination.hints import ReleaseHints

log = logging.getLogger(__name__)


class Replica:
    """Runs the election and release-sync loops; the runtime supplies what to do on each outcome."""

    def __init__(
        self,
        election: Election,
        hints: ReleaseHints,
        *,
        election_timeout_s: float,
        release_poll_s: float,
        scenarios: Callable[[], list[str]],
        lead: Callable[[str], Awaitable[None]],
        follow: Callable[[str], Awaitable[None]],
        sync: Callable[[str], Awaitable[None]],
        elects: bool = True,
    ) -> None:
        self.election = election
        self.hints = hints
        self.election_interval_s = max(0.05, election_timeout_s / 3)
        self.release_poll_s = release_poll_s
        self._scenarios = scenarios
        self.elects = elects  # False when the recipe does not learn: nothing to elect
        self._lead, self._follow, self._sync = lead, follow, sync
        self.leading: set[str] = set()
        self._leaders: dict[str, str | None] = {}  # scenario -> its leader as last seen by this follower
        self._hinted: asyncio.Queue[str] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def replica_id(self) -> str:
        return self.election.replica_id

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        hinted: asyncio.Queue[str] = asyncio.Queue()
        self._hinted = hinted

        def on_hint(scenario: str) -> None:
            loop.call_soon_threadsafe(hinted.put_nowait, scenario)

        self.hints.listen(on_hint)
        self._tasks = [
            asyncio.create_task(self._elections(), name="reef-elections"),
            asyncio.create_task(self._release_polls(), name="reef-release-polls"),
            asyncio.create_task(self._release_hints(hinted), name="reef-release-hints"),
        ]

    async def stop_loops(self) -> None:
        """Stop electing and syncing (the locks held stay held until `close`)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def close(self) -> None:
        """Stop listening for hints and give up every lock (call once the learners have stopped)."""
        await asyncio.to_thread(self.hints.close)
        await asyncio.to_thread(self.election.close)
        self.leading.clear()

    async def elect(self, scenario: str) -> bool:
        """Try to lead `scenario` now; start its learner on winning. Whether this replica leads it."""
        if scenario in self.leading:
            return True
        try:
            won = await asyncio.to_thread(self.election.try_lead, scenario)
        except Exception as exc:  # the lock's store is unreachable: follow until it is back
            log.warning("election of %s failed: %s", scenario, exc)
            return False
        if won:
            log.info("replica %s: leading scenario %s", self.replica_id, scenario)
            self.leading.add(scenario)
            self._leaders[scenario] = self.replica_id
            await self._lead(scenario)
        else:
            self._leaders[scenario] = await asyncio.to_thread(self.leader_of, scenario)
        return won

    async def holds(self, scenario: str) -> bool:
        """Whether this replica still holds the lock of `scenario`, asked of the lock's owner (no side effects)."""
        if scenario not in self.leading:
            return False
        try:
            return await asyncio.to_thread(self.election.holds, scenario)
        except Exception:
            return False

    def known_leader(self, scenario: str) -> str | None:
        """The scenario's leader as of this replica's last election round (no round trip)."""
        return self.replica_id if scenario in self.leading else self._leaders.get(scenario)

    async def still_leading(self, scenario: str) -> bool:
        """Whether the lock of `scenario` is still ours (a round trip); on losing it, stop its learner."""
        held = await self.holds(scenario)
        if not held:
            log.warning("replica %s: lost the learner lock of %s; stopping its learner", self.replica_id, scenario)
            self.leading.discard(scenario)
            await self._follow(scenario)
        return held

    async def resign(self, scenario: str) -> None:
        """The scenario is gone (deleted here): give its lock up."""
        self.leading.discard(scenario)
        self._leaders.pop(scenario, None)
        await asyncio.to_thread(self.election.resign, scenario)

    def leader_of(self, scenario: str) -> str | None:
        """The scenario's leader (blocking: call from a worker thread, or accept one round trip)."""
        if scenario in self.leading:
            return self.replica_id
        try:
            return self.election.leader_of(scenario)
        except Exception:
            return None

    def announce(self, scenario: str) -> None:
        """This replica moved `scenario`'s head: hint the others (best effort, never raises)."""
        with contextlib.suppress(Exception):
            self.hints.announce(scenario)

    async def _elections(self) -> None:
        while self.elects:
            await asyncio.sleep(self.election_interval_s)
            for scenario in self._scenarios():
                try:
                    if scenario in self.leading:
                        await self.still_leading(scenario)
                    else:
                        await self.elect(scenario)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("election round for %s failed", scenario)

    async def _release_polls(self) -> None:
        while True:
            await asyncio.sleep(self.release_poll_s)
            await self._sync_all()

    async def _release_hints(self, hinted: asyncio.Queue[str]) -> None:
        while True:
            scenario = await hinted.get()
            try:
                await self._sync(scenario)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("release sync of %s (hinted) failed", scenario)

    async def _sync_all(self) -> None:
        try:
            await self._sync("")  # "": every scenario, and those created elsewhere
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("release sync failed")
