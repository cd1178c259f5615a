"""The two-phase stream of `reef demo --recipe sdft`: learn one set of task families, then another.

Phase one trains on `FIRST` families, phase two on `SECOND`; each phase gets half the rounds and half the time
budget. The held-out score on the second set after phase two is the learning; the score on the first set after
phase two is the retention (with the fraction of phase one's gain that is kept). `--compare sft` runs the same
stream with `sft` in a fresh state directory in the same invocation.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rich.console import Console

from reef.demo.api import Measurement, ReefAPI
from reef.demo.tasks import DemoTask

FIRST = ("add", "number", "name", "city")
SECOND = ("color", "repeat", "first_letter")
MEASURE_MAX_TOKENS = 8

Rounds = Callable[..., Awaitable[None]]


def split_by_phase(test: list[DemoTask]) -> tuple[list[DemoTask], list[DemoTask]]:
    """The held-out tasks of the first and of the second phase's families."""
    return [t for t in test if t.family in FIRST], [t for t in test if t.family in SECOND]


async def two_phases(
    rounds: Rounds, make_run: Callable[[], Any], run: Any, profile: Any, args: argparse.Namespace, url: str,
    test: list[DemoTask], console: Console, started: float,
) -> None:  # fmt: skip
    """Run both phases against the server at `url`; fill `run` (baseline/final: the second set) and its `extra`."""
    first_test, second_test = split_by_phase(test)
    api = ReefAPI(url, f"demo-{profile.recipe}")
    try:
        base_second = await api.measure(second_test, MEASURE_MAX_TOKENS)
        phase_args = {**vars(args), "rounds": max(1, args.rounds // 2), "time_budget": args.time_budget / 2}
        one = make_run()
        console.print(f"  [bold]phase one[/]: training on {', '.join(FIRST)}")
        await rounds(one, profile, argparse.Namespace(**phase_args, families=FIRST), url, first_test, console, started)
        after_one_second = await api.measure(second_test, MEASURE_MAX_TOKENS)
        two = make_run()
        console.print(f"  [bold]phase two[/]: training on {', '.join(SECOND)}")
        phase_two = argparse.Namespace(**phase_args, families=SECOND)
        await rounds(two, profile, phase_two, url, second_test, console, time.monotonic())
        end_first = await api.measure(first_test, MEASURE_MAX_TOKENS)
    finally:
        await api.aclose()
    run.baseline, run.final, run.rounds = base_second, two.final, [*one.rounds, *two.rounds]
    run.extra["phases"] = phase_figures(one, after_one_second, two, end_first, run.metric)


def phase_figures(
    one: Any, after_one_second: Measurement, two: Any, end_first: Measurement, metric: str
) -> dict[str, Any]:
    """Learning and retention in figures: each phase's held-out score on both sets, and the fraction kept."""
    base_first, after_first = one.baseline.score(metric), one.final.score(metric)
    gained = after_first - base_first
    kept = end_first.score(metric) - base_first
    return {
        "first_families": list(FIRST),
        "second_families": list(SECOND),
        "first_set": {
            "baseline": base_first,
            "after_phase_one": after_first,
            "after_phase_two": end_first.score(metric),
        },
        "second_set": {
            "after_phase_one": after_one_second.score(metric),
            "after_phase_two": two.final.score(metric),
            "ci95": two.final.interval(metric),
        },
        "learning": round(two.final.score(metric) - after_one_second.score(metric), 4),
        "retention": end_first.score(metric),
        "retained_fraction": round(kept / gained, 4) if gained > 0 else None,
        "first_set_ci95": end_first.interval(metric),
    }
