"""A per-scenario bound on what the learner's own traffic spends upstream: tokens over a sliding hour.

The learner's traffic is everything it asks a model for on its own — the proposer, the judge, the gate's
generations (through `MeteredEngine`, the engine the learner and its evaluator are given) and the gate episodes'
requests, which arrive over `/v1` with an episode token and are counted there, for the scenario the token names
(`reef.service.routes.inference`). What a request says about itself (a tag, a header) never counts: an agent cannot
spend the learner's budget, and an episode cannot leave its spending out. Tokens come from the answer's `usage`
(`total_tokens`, else prompt + completion or input + output tokens). Past `learning.max_upstream_tokens_per_hour` a
scenario's learner starts no step (`blocker` says `budget: …`) until enough of the last hour's spending has aged
out; a step already running finishes.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.inference.base import Completion, CompletionStream, Engine, RequestContext

WINDOW_S = 3600.0


def usage_tokens(usage: Mapping[str, Any] | None) -> int:
    """The tokens an answer's `usage` reports (0 when it reports none)."""
    if not isinstance(usage, Mapping):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int) and not isinstance(total, bool):
        return max(total, 0)
    parts = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
    return sum(v for k in parts if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v > 0)


class UpstreamBudget:
    """Tokens spent per scenario over the last hour, against `max_tokens_per_hour` (0: no limit)."""

    def __init__(self, max_tokens_per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_tokens_per_hour = max_tokens_per_hour
        self._clock = clock
        self._lock = threading.Lock()
        self._spent: dict[str, collections.deque[tuple[float, int]]] = {}

    def spend(self, scenario: str, tokens: int) -> None:
        """Count `tokens` spent now for `scenario`."""
        if tokens <= 0:
            return
        with self._lock:
            self._spent.setdefault(scenario, collections.deque()).append((self._clock(), tokens))

    def spent(self, scenario: str) -> int:
        """Tokens `scenario` spent over the last hour."""
        with self._lock:
            return sum(tokens for _, tokens in self._window(scenario))

    def blocker(self, scenario: str) -> str | None:
        """Why `scenario`'s learner may not start a step now (`budget: …`), or None."""
        if self.max_tokens_per_hour <= 0:
            return None
        with self._lock:
            window = self._window(scenario)
            spent = sum(tokens for _, tokens in window)
            if spent < self.max_tokens_per_hour:
                return None
            remaining, resume_at = spent, self._clock()
            for at, tokens in window:  # the oldest spending ages out first
                remaining -= tokens
                resume_at = at + WINDOW_S
                if remaining < self.max_tokens_per_hour:
                    break
        wait_s = max(0.0, resume_at - self._clock())
        return (
            f"budget: {spent} upstream tokens in the last hour, at or over "
            f"learning.max_upstream_tokens_per_hour {self.max_tokens_per_hour}; resumes in {wait_s:.0f} s"
        )

    def _window(self, scenario: str) -> collections.deque[tuple[float, int]]:
        window = self._spent.setdefault(scenario, collections.deque())
        oldest = self._clock() - WINDOW_S
        while window and window[0][0] <= oldest:
            window.popleft()
        return window


class MeteredEngine(Engine):
    """An engine that counts the `usage` of every answer against its request's scenario in `budget`."""

    def __init__(self, engine: Engine, budget: UpstreamBudget) -> None:
        self.engine = engine
        self.budget = budget
        self.scores_completions = engine.scores_completions

    def __getattr__(self, name: str) -> Any:  # everything else (activation, adapters…) is the engine's own
        return getattr(self.engine, name)

    async def start(self) -> None:
        await self.engine.start()

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        completion = await self.engine.complete(dialect, body, ctx)
        usage = completion.usage if completion.usage is not None else completion.body.get("usage")
        self.budget.spend(ctx.scenario, usage_tokens(usage))
        return completion

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        return await self.engine.stream(dialect, body, ctx)  # the learner never streams

    def spend(self, scenario: str, usage: Any) -> None:
        self.budget.spend(scenario, usage_tokens(usage))

    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return await self.engine.count_tokens(body, ctx)

    async def score(self, prompt_ids: list[int], completion_ids: list[int], ctx: RequestContext) -> list[float]:
        return await self.engine.score(prompt_ids, completion_ids, ctx)

    async def score_answer(self, body: dict[str, Any], answer: str, ctx: RequestContext) -> list[float]:
        return await self.engine.score_answer(body, answer, ctx)

    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        await self.engine.activate(scenario, release, path)

    def active_release_id(self, scenario: str) -> str | None:
        return self.engine.active_release_id(scenario)

    def models(self) -> list[dict[str, Any]]:
        return self.engine.models()

    async def aclose(self) -> None:
        await self.engine.aclose()
