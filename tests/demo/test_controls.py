"""The control arms' plumbing: what the prompt control sends, the fallback arm, proposer share, means over seeds,
and the catalogue suite (outcomes are measured by running the demos, not here)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from reef.demo import catalogue
from reef.demo import run as demo_run
from reef.demo.api import Answer, Measurement
from reef.demo.controls import (
    ANSWER_RESERVE_TOKENS,
    CHARS_PER_TOKEN,
    CONTEXT_TOKENS,
    context_turns,
    prompt_control_messages,
    proposer_share,
)
from reef.demo.report import render_report
from reef.demo.result import DemoRun
from reef.demo.seeds import aggregate, run_seeds
from reef.demo.suites import SUITES
from reef.demo.tasks import DemoTask


def measurement(score: float, low: float = 0.0, high: float = 1.0) -> Measurement:
    return Measurement(exact=score, partial=score, by_family={}, release_id=None, wall_s=0.0, exact_ci95=(low, high))


def test_the_prompt_control_takes_as_many_examples_as_the_context_holds_and_no_more():
    examples = [DemoTask("f", f"question number {i} " * 5, str(i)) for i in range(2_000)]
    turns = context_turns("be brief", examples)
    used = sum(len(q) + len(a) for q, a in turns) // CHARS_PER_TOKEN
    assert 50 < len(turns) < 2_000 and used <= CONTEXT_TOKENS - ANSWER_RESERVE_TOKENS
    assert len(context_turns("be brief", examples, context_tokens=2 * CONTEXT_TOKENS)) > len(turns)


def test_the_catalogue_prompt_control_holds_the_whole_catalogue_and_fits_the_context():
    messages = prompt_control_messages(SUITES["catalogue"], seed=3)
    system = messages[0]["content"]
    assert all(f"{code}: {department}" in system for code, department in catalogue.catalogue(3).items())
    assert sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN <= CONTEXT_TOKENS - ANSWER_RESERVE_TOKENS
    assert (len(messages) - 1) // 2 == SUITES["catalogue"].control_examples  # the suite's cap, not the context's


def test_the_profile_on_a_suite_takes_the_suite_settings_and_keeps_recipe_config_overrides():
    from reef.demo.recipes import PROFILES, demo_profile

    assert demo_profile("sft", None) is PROFILES["sft"]
    on_catalogue = demo_profile("sft", {"demonstration_from_feedback": False}, "catalogue")
    assert on_catalogue.prompts_per_round == on_catalogue.batch_size > PROFILES["sft"].prompts_per_round
    assert on_catalogue.recipe_config == {"demonstration_from_feedback": False}
    assert demo_profile("rl", None, "catalogue") is PROFILES["rl"]  # no catalogue settings for rl: unchanged


def test_the_catalogue_asks_about_trained_facts_in_phrasings_never_trained_on():
    facts = catalogue.catalogue(0)
    train, test = catalogue.generate("train", 500, 0), catalogue.generate("test", 35, 0)
    assert len(test) == 35 and {t.answer for t in test} <= set(catalogue.DEPARTMENTS)
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    trained_phrasings = {t.prompt.replace(code, "{code}") for t in train for code in facts if code in t.prompt}
    assert not any(t.prompt.replace(c, "{code}") in trained_phrasings for t in test for c in facts if c in t.prompt)
    # The same direction of lookup: every question names a code and its answer is that code's department.
    for task in test:
        (code,) = [c for c in facts if c in task.prompt]
        assert task.answer == facts[code]
    assert catalogue.catalogue(0) != catalogue.catalogue(1)  # regenerated per seed


def test_proposer_share_counts_published_steps_only():
    rounds = [
        {"verdict": "published", "source": "proposer"},
        {"verdict": "published", "source": "fallback"},
        {"verdict": "rejected", "source": "proposer"},
        {"verdict": "published", "source": "fallback"},
    ]
    assert proposer_share(rounds) == pytest.approx(1 / 3, abs=1e-4)
    assert proposer_share([{"verdict": "rejected", "source": "proposer"}]) is None


def test_a_harness_demo_runs_its_fallback_arm_with_the_proposer_off_on_the_same_tasks(monkeypatch, tmp_path):
    served: list[tuple[str, dict[str, Any], list[DemoTask], int]] = []

    def fake_serve(run, profile, args, state_dir, port, validation, test, console, started):
        served.append((profile.recipe, dict(profile.recipe_config), list(test), args.rounds))
        off = profile.recipe_config.get("proposer") == "off"
        run.baseline = measurement(0.1)
        run.final = measurement(0.4 if off else 0.6)
        run.rounds = [{"round": 1, "verdict": "published", "source": "fallback" if off else "proposer"}]
        return 0

    monkeypatch.setattr(demo_run, "_serve", fake_serve)
    args = demo_args(tmp_path, recipe="evolve")
    code, run = demo_run.one_run(args, Console(file=io.StringIO()))
    result = run.to_json()
    assert code == 0 and [s[0] for s in served] == ["evolve", "evolve"]
    assert "proposer" not in served[0][1] and served[1][1]["proposer"] == "off"
    assert served[0][2] == served[1][2] and served[1][3] == 1  # the same held-out tasks, as many rounds
    assert result["controls"]["fallback"]["score"] == 0.4 and result["proposer_share"] == 1.0
    assert "control: fallback" in render_report(result) and "proposer share" in render_report(result)


def test_seeds_run_one_demo_per_seed_and_report_means_with_intervals_over_seeds(tmp_path):
    seen: list[int] = []

    def one_run(args, console):
        seen.append(args.seed)
        run = DemoRun("sft", suite="catalogue")
        run.baseline, run.final = measurement(0.1), measurement(0.5 + 0.1 * args.seed)
        run.controls["prompt"] = measurement(0.2)
        return 0, run

    args = demo_args(tmp_path, seed=1, seeds=3)
    code, result = run_seeds(args, Console(file=io.StringIO()), one_run)
    assert code == 0 and seen == [1, 2, 3] and result["seed_values"] == [1, 2, 3]
    assert result["final"] == pytest.approx(0.7) and result["improvement"] == pytest.approx(0.6)
    low, high = result["final_ci95"]
    assert low < 0.7 < high
    assert result["controls"]["prompt"]["score"] == pytest.approx(0.2) and len(result["seeds"]) == 3
    assert [s["final"] for s in result["seeds"]] == pytest.approx([0.6, 0.7, 0.8])
    assert "Per seed" in render_report(result)
    json.dumps(result)


def test_means_over_seeds_need_two_seeds_for_an_interval():
    single = aggregate([DemoRun("sft", baseline=measurement(0.1), final=measurement(0.3)).to_json()], [0])
    assert single["final"] == 0.3 and single["final_ci95"] is None


def test_the_openclawrl_prompt_control_tells_the_model_the_users_preference():
    from reef.demo.openclawrl import PREFERENCE_INSTRUCTION
    from reef.demo.user import MAX_WORDS

    assert f"at most {MAX_WORDS} words" in PREFERENCE_INSTRUCTION


def demo_args(tmp_path: Path, **overrides: Any) -> argparse.Namespace:
    values = dict(
        recipe="sft", recipe_config=None, rounds=None, state_dir=tmp_path / "state", port=1, seed=0, seeds=1,
        validation_tasks=14, suite="skills", controls=True, compare=None, keep_state=True, json=False, report=None,
        time_budget=600.0, learning_rate=None, epochs=None, serve_flags=[], sample_from="serving",
        single_phase=False, teacher_rounds=8,
    )  # fmt: skip
    values.update(overrides)
    return argparse.Namespace(**values)


async def test_the_openclawrl_control_asks_each_held_out_question_after_the_preference_instruction():
    from reef.demo.openclawrl import PREFERENCE_INSTRUCTION, measure
    from reef.demo.user import Question

    class SessionsAPI:
        def __init__(self) -> None:
            self.sent: list[list[dict[str, str]]] = []

        async def complete(self, messages, temperature, max_tokens, tags=None, release_id=None):
            self.sent.append(messages)
            return (
                ("Paris." if messages[0]["role"] == "system" else "The capital of France is " + "very " * 20),
                "",
                None,
            )

    api = SessionsAPI()
    test = [Question("What is the capital of France?", "capital")] * 4
    extra: dict[str, Any] = {}
    prefix = [{"role": "system", "content": PREFERENCE_INSTRUCTION}]
    control = await measure(api, test, "control", extra, prefix)
    base = await measure(api, test, "base", extra)
    assert all(m[0] == prefix[0] and m[-1]["content"] == test[0].text for m in api.sent[:4])
    assert all(len(m) == 1 for m in api.sent[4:])
    assert control.acceptance == 1.0 and base.acceptance == 0.0
    assert set(extra["examples"]) == {"prompt_control", "baseline"}


def test_scores_alone_put_the_answer_form_before_every_question_and_grade_exactly():
    from reef.demo.recipes import PROFILES, demo_profile
    from reef.demo.suites import suite_named

    scored = suite_named("catalogue", "score")
    facts = catalogue.catalogue(5)
    form = catalogue.answer_form(5)
    assert form[0] == ("system", catalogue.FORM_INSTRUCTION)
    assert all(department in catalogue.FORM_INSTRUCTION for department in catalogue.DEPARTMENTS)
    shown = [text for role, text in form[1:] if role == "user"]
    assert len(shown) == 2 and not any(code in question for code in facts for question in shown)  # not a fact
    for split in ("train", "validation", "test"):
        tasks = scored.generate(split, 10, 5)
        assert tasks and all(task.context == form for task in tasks)
        assert tasks[0].messages()[:-1] == [{"role": r, "content": t} for r, t in form]
        assert tasks[0].messages()[-1] == tasks[0].question()
    assert all(task.context == () for task in suite_named("catalogue").generate("test", 10, 5))
    profile = demo_profile("rl", None, "catalogue", "score")
    assert profile.grading == "exact" and PROFILES["rl"].grading == "partial"
    task = scored.generate("test", 1, 5)[0]
    near = Answer(task=task, text=f"It is {task.answer}", receipt="", release_id=None)
    assert profile.score(near) == 0.0 and PROFILES["rl"].score(near) > 0  # 0/1, no partial credit
    assert profile.metadata(near, None) == {"task": "catalogue"}  # no demonstration reaches the report
    assert profile.prompts_per_round * profile.samples_per_prompt == profile.batch_size


def test_the_demo_refuses_scores_alone_for_a_recipe_that_learns_from_demonstrations(capsys):
    from reef.cli.main import main

    assert main(["demo", "--recipe", "sft", "--feedback", "score"]) == 2
    assert "--feedback score" in capsys.readouterr().err
