"""The demo's round loop: it runs rounds until its count or its time budget, whichever comes first."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

import pytest
from rich.console import Console

from reef.demo import rounds as demo_rounds
from reef.demo.api import Measurement
from reef.demo.recipes import PROFILES
from reef.demo.result import DemoRun


class Clock:
    """A monotonic clock the fake rounds advance (no test waits on the wall clock)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeAPI:
    def __init__(self, url: str, scenario: str) -> None:
        self.scenario = scenario
        self.tips_read = 0

    async def measure(self, tasks: list[Any], max_tokens: int) -> Measurement:
        return Measurement(exact=0.0, partial=0.2, by_family={}, release_id=None, wall_s=0.0)

    async def last_step(self) -> int:
        return 0

    async def lineage_tip(self) -> str | None:
        self.tips_read += 1
        return f"tip-{self.tips_read}" if self.tips_read % 2 else None

    async def aclose(self) -> None:
        return None


def _rounds(
    monkeypatch: pytest.MonkeyPatch, rounds: int, budget: float, round_s: float, sample_from: str = "serving"
) -> list[dict[str, Any]]:
    clock = Clock()
    monkeypatch.setattr(demo_rounds, "time", clock)
    monkeypatch.setattr(demo_rounds, "ReefAPI", FakeAPI)

    async def one_round(api: Any, profile: Any, number: int, *rest: Any) -> dict[str, Any]:
        clock.now += round_s
        pin = rest[-1]
        return {"round": number, "step": number, "verdict": "kept", "measured": None, "train_score": 0.2, "pin": pin}

    monkeypatch.setattr(demo_rounds, "one_round", one_round)
    run = DemoRun("rl", metric="partial")
    args = argparse.Namespace(rounds=rounds, time_budget=budget, seed=0, sample_from=sample_from)
    console = Console(file=io.StringIO())
    asyncio.run(demo_rounds.run_rounds(run, PROFILES["rl"], args, "http://fake", [], console, clock.now))
    return run.rounds


def test_rounds_stop_before_one_that_would_end_past_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, rounds=100, budget=600.0, round_s=70.0)
    # After 8 rounds (560 s) a ninth, expected to take 70 s like the last ones, would end at 630 s.
    assert [r["round"] for r in rounds] == list(range(1, 9))
    assert rounds[-1]["elapsed_s"] == 560.0


def test_rounds_stop_at_their_count_when_the_budget_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, rounds=5, budget=600.0, round_s=10.0)
    assert len(rounds) == 5


def test_sampling_from_the_lineage_pins_each_round_to_the_learners_tip(monkeypatch: pytest.MonkeyPatch) -> None:
    serving = _rounds(monkeypatch, rounds=3, budget=600.0, round_s=10.0)
    lineage = _rounds(monkeypatch, rounds=3, budget=600.0, round_s=10.0, sample_from="lineage")
    assert [r["pin"] for r in serving] == [None, None, None]  # the serving release answers
    assert [r["pin"] for r in lineage] == ["tip-1", None, "tip-3"]  # read afresh before each round
