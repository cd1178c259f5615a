"""The plumbing of `reef demo --rollout canary`: its user phase against a fake server, its wrong answers and its
flags. (The demo itself runs the embedded model: the lead runs it; see docs/guides/rollouts.md.)"""

from __future__ import annotations

import argparse

from reef.application.config import load_settings, parse_overrides
from reef.demo import rollout
from reef.demo.tasks import generate
from tests.fakes.rollout_client import FakeRolloutClient


async def test_users_roll_back_a_canary_that_answers_worse_and_only_its_share_of_them_saw_it(monkeypatch) -> None:
    monkeypatch.setattr(rollout, "_settled", lambda client, view: client.rollout())
    client = FakeRolloutClient(right_candidate=0.05, right_incumbent=0.95)
    questions = generate("test", 30, seed=1, families=rollout.FAMILIES)
    outcome = await rollout.users_until_decided(client, "worse", questions)
    assert outcome.state == "rolled_back" and outcome.decided_by == "test"
    assert outcome.reports == client.tallies["candidate"].n + client.tallies["incumbent"].n
    assert client.reports == outcome.reports
    # Sticky: each user stayed on one arm, and exactly those on the candidate arm count as exposed.
    assert all(len(arms) == 1 for arms in client.arms_of_users.values())
    on_candidate = {user for user, arms in client.arms_of_users.items() if arms == {"candidate"}}
    assert outcome.exposed_users == len(on_candidate) and outcome.users == len(client.arms_of_users)
    assert 0.2 <= outcome.exposed_share <= 0.8


async def test_users_promote_a_canary_that_answers_better(monkeypatch) -> None:
    monkeypatch.setattr(rollout, "_settled", lambda client, view: client.rollout())
    client = FakeRolloutClient(right_candidate=0.9, right_incumbent=0.1, seed=3)
    questions = generate("test", 30, seed=2, families=rollout.FAMILIES)
    outcome = await rollout.users_until_decided(client, "better", questions)
    assert outcome.state == "promoted" and outcome.to_json()["exposed_share"] == round(outcome.exposed_share, 4)


def test_the_worse_release_is_trained_on_answers_the_users_grade_wrong() -> None:
    tasks = generate("train", rollout.TRAINING_PROMPTS, seed=0, families=rollout.FAMILIES)
    wrong = rollout.wrong_answers(tasks)
    assert len(wrong) == len(tasks)
    assert all(answer != task.answer for task, answer in zip(tasks, wrong, strict=True))


def test_the_demo_serves_in_canary_mode_with_flags_reef_serve_accepts() -> None:
    args = argparse.Namespace(learning_rate=None, epochs=None, serve_flags=["--rollout.canary-share", "0.4"])
    flags = rollout.serve_flags(args)
    settings, _ = load_settings(None, parse_overrides(flags))
    assert settings.rollout.mode == "canary" and settings.rollout.canary_share == 0.4
    assert settings.evaluation.policy == "always"


def test_the_demo_fails_unless_the_better_release_is_promoted_and_the_worse_rolled_back() -> None:
    import io

    from rich.console import Console

    def outcome(label: str, state: str) -> rollout.RolloutOutcome:
        return rollout.RolloutOutcome(label, "r", state, "test", 40, 40, 20, 1.0)

    quiet = Console(file=io.StringIO())
    assert rollout.summarize([outcome("better", "promoted"), outcome("worse", "rolled_back")], quiet) == 0
    assert rollout.summarize([outcome("better", "promoted"), outcome("worse", "canary")], quiet) == 1
    assert rollout.summarize([outcome("better", "promoted")], quiet) == 1
