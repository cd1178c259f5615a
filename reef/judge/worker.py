"""The judge worker: runs beside a scenario's learner, judges the turns its processor lists as due, and hands
the verdicts over as records. Never in the serving path.

Each turn gets `votes` votes; every judge call is bounded by `timeout_s`, retried `retries` times, and at most
`concurrency` calls are in flight. A turn whose votes cannot all be had is left due (nothing is lost) and the
judge is marked **down**: learning waits (`blocker`) and `/reef/status` says why, until a later try (after a
backoff that doubles up to `MAX_BACKOFF_S`) succeeds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from reef.core.records import Record
from reef.judge.base import Judge, JudgeRequest, Verdict, Vote
from reef.judge.judges import JudgeSettings
from reef.judge.votes import dedupe_hints, plurality
from reef.learning.base import FeedbackSource

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
RETRY_PAUSE_S = 0.5  # between the tries of one call


class JudgeUnavailable(Exception):
    """A turn could not be judged: every try of one of its votes failed."""


class JudgeWorker(FeedbackSource):
    """Judges due turns with `judge` and delivers each `Verdict` as a record of `scenario`."""

    def __init__(
        self, scenario: str, judge: Judge, settings: JudgeSettings, poll_s: float = 1.0, backoff_s: float = 2.0
    ) -> None:
        self.scenario = scenario
        self.judge = judge
        self.settings = settings
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._down: str | None = None
        self._down_since: float | None = None
        self._failures = 0
        self._judged = 0
        self._rewards: collections.Counter[int] = collections.Counter()
        self._waiting = 0
        self._in_flight = 0
        # Delivered verdicts the processor has not read yet: their turns are still listed as due until it does.
        self._delivered: set[str] = set()

    def meter(self, on_usage: Callable[[Any], None]) -> None:
        self.judge.meter(on_usage)

    def blocker(self) -> str | None:
        if self._down is None:
            return None
        return f"the judge does not answer ({self.judge.name}): learning is paused until it does; no turn is lost"

    def status(self) -> dict[str, Any]:
        return {
            "kind": "judge",
            "judge": self.judge.name,
            "state": "down" if self._down else ("judging" if self._in_flight else "idle"),
            "error": self._down,
            "down_since": self._down_since,
            "consecutive_failures": self._failures,
            "turns_judged": self._judged,
            "turns_waiting": self._waiting,
            "rewards": {str(value): self._rewards[value] for value in (-1, 0, 1)},
        }

    async def run(self, due: Callable[[], list[Any]], deliver: Callable[[list[Record]], Awaitable[None]]) -> None:
        try:
            while True:
                listed = [r for r in due() if isinstance(r, JudgeRequest)]
                self._delivered &= {r.turn_id for r in listed}
                requests = [r for r in listed if r.turn_id not in self._delivered]
                self._waiting = len(requests)
                if not requests:
                    await asyncio.sleep(self.poll_s)
                    continue
                try:
                    failed = await self.judge_round(requests[: self.settings.concurrency * 4], deliver)
                except Exception as exc:  # storing the verdicts failed: they are judged again on the next round
                    log.exception("judge of %s: delivering verdicts failed", self.scenario)
                    self._down, failed = f"storing verdicts failed: {type(exc).__name__}: {exc}", True
                    self._failures += 1
                if failed:
                    await asyncio.sleep(min(self.backoff_s * 2 ** (self._failures - 1), MAX_BACKOFF_S))
        finally:
            with contextlib.suppress(Exception):
                await self.judge.aclose()

    async def judge_round(
        self, requests: list[JudgeRequest], deliver: Callable[[list[Record]], Awaitable[None]]
    ) -> bool:
        """Judge `requests` concurrently and deliver the verdicts; True when some could not be judged."""
        self._in_flight = len(requests)
        try:
            outcomes = await asyncio.gather(*(self.verdict(r) for r in requests), return_exceptions=True)
        finally:
            self._in_flight = 0
        verdicts = [o for o in outcomes if isinstance(o, Verdict)]
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if verdicts:
            now = time.time()
            await deliver([v.record(self.scenario, now) for v in verdicts])
            self._delivered.update(v.turn_id for v in verdicts)
            self._judged += len(verdicts)
            self._rewards.update(v.reward for v in verdicts)
        if errors:
            self._failures += 1
            if self._down is None:
                self._down_since = time.time()
            self._down = f"{type(errors[0]).__name__}: {errors[0]}"
            log.warning("judge of %s: %d of %d turns not judged: %s", self.scenario, len(errors), len(requests),
                        self._down)  # fmt: skip
            return True
        self._down, self._down_since, self._failures = None, None, 0
        return False

    async def verdict(self, request: JudgeRequest) -> Verdict:
        """`votes` votes on one turn, their plurality and the hints of its −1 votes."""
        votes = await asyncio.gather(*(self._vote(request) for _ in range(self.settings.votes)))
        reward = plurality([v.value for v in votes])
        hints = dedupe_hints([v.hint for v in votes if v.value == -1], self.settings.max_hints) if reward < 0 else []
        return Verdict(
            turn_id=request.turn_id,
            votes=tuple(v.value for v in votes),
            reward=reward,
            hints=tuple(hints),
            judge=self.judge.name,
            next_state=dict(request.next_state),
            next_record_id=request.next_record_id,
            session=request.session,
        )

    async def _vote(self, request: JudgeRequest) -> Vote:
        last: BaseException | None = None
        for attempt in range(self.settings.retries + 1):
            if attempt:
                await asyncio.sleep(RETRY_PAUSE_S * attempt)
            try:
                async with self._slots:
                    async with asyncio.timeout(self.settings.timeout_s):
                        return await self.judge.vote(request)
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                last = TimeoutError(f"no answer within {self.settings.timeout_s:g} s")
            except Exception as exc:  # a 5xx, a refused connection, a crashing function
                last = exc
        raise JudgeUnavailable(f"{type(last).__name__}: {last}" if last else "no answer")
