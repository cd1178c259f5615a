"""The demo's round loop: it measures the prompt control beside the base model, then runs rounds until its count or
its time budget, whichever comes first."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

import pytest
from rich.console import Console

from reef.demo import catalogue
from reef.demo import rounds as demo_rounds
from reef.demo.api import Answer, Measurement, ReefAPI
from reef.demo.recipes import demo_profile
from reef.demo.result import DemoRun
from reef.demo.suites import SUITES, suite_named


class Clock:
    """A monotonic clock the fake rounds advance (no test waits on the wall clock)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeAPI:
    prefixes: list[list[dict[str, str]]] = []
    pins: list[str | None] = []
    clock: Clock | None = None
    control_s = 0.0  # how long the prompt control takes on the fake clock

    def __init__(self, url: str, scenario: str) -> None:
        self.scenario = scenario
        self.tips_read = 0

    async def measure(
        self, tasks: list[Any], max_tokens: int, prefix: Any = (), release_id: str | None = None
    ) -> Measurement:
        FakeAPI.prefixes.append(list(prefix))
        FakeAPI.pins.append(release_id)
        if prefix:  # the prompt control scores apart from the base model
            assert FakeAPI.clock is not None
            FakeAPI.clock.now += FakeAPI.control_s
            return Measurement(
                exact=0.3, partial=0.5, by_family={}, release_id=None, wall_s=0.0, partial_ci95=(0.4, 0.6)
            )
        return Measurement(exact=0.0, partial=0.2, by_family={}, release_id="base-release", wall_s=0.0)

    async def last_step(self) -> int:
        return 0

    async def lineage_tip(self) -> str | None:
        self.tips_read += 1
        return f"tip-{self.tips_read}" if self.tips_read % 2 else None

    async def aclose(self) -> None:
        return None


def _run(
    monkeypatch: pytest.MonkeyPatch,
    rounds: int,
    budget: float,
    round_s: float,
    sample_from: str = "serving",
    recipe: str = "rl",
    controls: bool = False,
    suite: str = "skills",
    control_s: float = 0.0,
    feedback: str = "recipe",
) -> DemoRun:
    clock = Clock()
    FakeAPI.clock, FakeAPI.control_s = clock, control_s
    monkeypatch.setattr(demo_rounds, "time", clock)
    monkeypatch.setattr(demo_rounds, "ReefAPI", FakeAPI)

    test = suite_named(suite, feedback).generate("test", 4, 0)

    async def one_round(api: Any, profile: Any, number: int, *rest: Any) -> dict[str, Any]:
        clock.now += round_s
        training, pin, scored_right = rest[0], rest[4], rest[5]
        for task in next(training)[:2]:  # the users scored two answers of the round 1: the right department
            scored_right.append(Answer(task=task, text=task.answer, receipt=f"r{number}", release_id=None))
        return {"round": number, "step": number, "verdict": "kept", "measured": None, "train_score": 0.2, "pin": pin}

    monkeypatch.setattr(demo_rounds, "one_round", one_round)
    FakeAPI.prefixes, FakeAPI.pins = [], []
    profile = demo_profile(recipe, None, suite, feedback)
    run = DemoRun(recipe, metric=profile.grading, suite=suite)
    args = argparse.Namespace(
        rounds=rounds, time_budget=budget, seed=0, sample_from=sample_from, controls=controls, suite=suite,
        feedback=feedback,
    )  # fmt: skip
    console = Console(file=io.StringIO())
    asyncio.run(demo_rounds.run_rounds(run, profile, args, "http://fake", test, console, clock.now))
    return run


def _rounds(
    monkeypatch: pytest.MonkeyPatch, rounds: int, budget: float, round_s: float, sample_from: str = "serving"
) -> list[dict[str, Any]]:
    return _run(monkeypatch, rounds, budget, round_s, sample_from).rounds


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


@pytest.mark.parametrize("suite", ["skills", "catalogue"])
def test_the_prompt_control_is_measured_once_on_the_base_model_with_the_suites_instruction_and_examples(
    monkeypatch: pytest.MonkeyPatch, suite: str
) -> None:
    run = _run(monkeypatch, rounds=2, budget=600.0, round_s=10.0, controls=True, suite=suite)
    with_prefix = [p for p in FakeAPI.prefixes if p]
    assert len(with_prefix) == 1 and FakeAPI.prefixes[0] == []  # the base model first, then the control
    prefix = with_prefix[0]
    assert prefix[0] == {"role": "system", "content": SUITES[suite].instruction(0)}
    assert [m["role"] for m in prefix[1:5]] == ["user", "assistant", "user", "assistant"]
    assert run.to_json()["controls"] == {"prompt": {"score": 0.5, "interval": [0.4, 0.6]}}
    assert run.settings["prompt_control_examples"] == (len(prefix) - 1) // 2 > 8


def test_without_controls_or_for_a_harness_method_no_prompt_control_is_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _run(monkeypatch, rounds=1, budget=600.0, round_s=10.0).to_json()["controls"] == {}
    harness = _run(monkeypatch, rounds=1, budget=600.0, round_s=10.0, recipe="evolve", controls=True)
    assert harness.controls == {} and all(p == [] for p in FakeAPI.prefixes)
    assert "proposer_share" not in harness.to_json()  # a plain DemoRun: the driver marks harness runs


def test_the_time_budget_covers_the_rounds_and_the_prompt_control_takes_its_time_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A control longer than the whole budget still leaves the method all of its rounds.
    run = _run(monkeypatch, rounds=100, budget=600.0, round_s=70.0, controls=True, control_s=700.0)
    assert [r["round"] for r in run.rounds] == list(range(1, 9))
    assert run.settings["control_s"] == 700.0
    assert run.rounds[-1]["elapsed_s"] == 700.0 + 560.0  # the rounds' own clock is the wall clock
    assert "control_s" not in _run(monkeypatch, rounds=1, budget=600.0, round_s=10.0).settings


def test_scores_alone_get_a_memory_control_of_the_answers_scored_1_on_the_base_model_after_the_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _run(monkeypatch, rounds=2, budget=600.0, round_s=10.0, controls=True, suite="catalogue", feedback="score")
    assert len(FakeAPI.prefixes) == 3  # the base model, the prompt control, then the memory control
    memory, pin = FakeAPI.prefixes[2], FakeAPI.pins[2]
    assert pin == "base-release"  # the release the baseline was measured on, not whatever serves after the rounds
    assert memory[0] == {"role": "system", "content": catalogue.FORM_INSTRUCTION}
    remembered = [m for m in memory[1:] if m["role"] == "assistant"]
    assert len(remembered) == run.settings["memory_control_examples"] == 4  # two a round, distinct questions
    facts = catalogue.catalogue(0)
    assert all(m["content"] in facts.values() for m in remembered)
    assert set(run.to_json()["controls"]) == {"prompt", "memory"}
    # on the recipe's own feedback there is no memory control
    assert set(_run(monkeypatch, 1, 600.0, 10.0, controls=True, suite="catalogue").to_json()["controls"]) == {"prompt"}


class IdleLearner(ReefAPI):
    """A learner that never commits and never starts a job: only its batch is short."""

    def __init__(self) -> None:
        super().__init__("http://fake", "demo")

    async def commits(self, after_step: int) -> list[dict[str, Any]]:
        return []

    async def status(self) -> dict[str, Any]:
        return {"job": {"state": "idle"}}


def test_a_round_whose_nudges_run_out_ends_starved_instead_of_waiting_out_its_budget() -> None:
    sends: list[int] = []

    async def nudge() -> bool:
        sends.append(1)
        return len(sends) < 3  # two sends, then nothing more to send

    async def wait() -> Any:
        api = IdleLearner()
        try:
            return await api.wait_for_step(0, timeout_s=3600.0, poll_s=0.0, nudge=nudge)
        finally:
            await api.aclose()

    outcome = asyncio.run(wait())
    assert outcome.verdict == "starved" and outcome.commit is None
    assert len(sends) == 3  # the third nudge said it had nothing left
