"""The demo's HTML report and the per-recipe settings it drives the server with."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from reef.application.config import load_settings, parse_overrides
from reef.demo.api import Answer
from reef.demo.distillation import gap_closed
from reef.demo.recipes import PROFILES
from reef.demo.report import curve_svg, learning_curve_points, render_report, write_report
from reef.demo.server import free_port, serve_command
from reef.demo.tasks import DemoTask


def _result() -> dict:
    return {
        "recipe": "sft",
        "metric": "exact",
        "baseline": 0.0,
        "final": 0.5,
        "baseline_exact": 0.0,
        "final_exact": 0.5,
        "baseline_partial": 0.4,
        "final_partial": 0.6,
        "baseline_by_family": {"add": 0.0, "city": 0.0},
        "final_by_family": {"add": 0.2, "city": 1.0},
        "rounds": [
            {"round": 1, "step": 1, "verdict": "published", "heldout_exact": 0.2, "heldout_partial": 0.5},
            {"round": 2, "step": 2, "verdict": "rejected", "reason": "wins 0 <script>", "heldout_exact": 0.2},
            {"round": 3, "step": 3, "verdict": "published", "heldout_exact": 0.5, "heldout_partial": 0.6},
        ],
        "published": 2,
        "wall_s": 321.0,
        "settings": {"learning_rate": 0.0006},
        "error": None,
    }


def test_the_curve_starts_at_the_baseline_and_has_a_point_per_round() -> None:
    assert learning_curve_points(_result()) == [(0, 0.0), (1, 0.2), (2, 0.2), (3, 0.5)]
    assert learning_curve_points(_result(), "partial") == [(0, 0.4), (1, 0.5), (3, 0.6)]


def test_the_curve_is_well_formed_svg_with_one_marker_per_point() -> None:
    svg = curve_svg([(0, 0.0), (1, 0.25), (2, 1.0)])
    root = ElementTree.fromstring(svg)
    circles = [e for e in root.iter() if e.tag.endswith("circle")]
    assert len(circles) == 3


def test_the_report_is_self_contained_and_escapes_server_text(tmp_path: Path) -> None:
    path = tmp_path / "out" / "demo-report.html"
    write_report(path, _result())
    page = path.read_text()
    assert "0.00 → 0.50 (+0.50)" in page
    assert "<svg" in page and "<polyline" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "src=" not in page and "<link" not in page


def test_a_report_without_measurements_still_renders() -> None:
    page = render_report({"recipe": "rl", "baseline": None, "final": None, "rounds": [], "error": "server died"})
    assert "no measurement" in page and "server died" in page


def test_sft_reports_the_right_answer_as_the_demonstration_and_scores_exactly() -> None:
    task = DemoTask("city", "Which city is mentioned: 'We flew to Rome in May.'", "Rome")
    answer = Answer(task, "The city mentioned is Rome.", "rec_1", None)
    assert PROFILES["sft"].score(answer) == 0.0
    assert PROFILES["sft"].metadata(answer, None) == {"demonstration": "Rome"}
    assert 0.0 < PROFILES["rl"].score(answer) < 1.0
    assert PROFILES["grpo"].metadata(answer, "g1") == {"group": "g1"}
    assert PROFILES["rl"].metadata(answer, None) == {"task": answer.task.family}
    assert PROFILES["rl"].recipe_config["baseline_by"] == "task"


def test_every_profile_fills_one_learner_batch_per_round() -> None:
    for profile in PROFILES.values():
        assert profile.prompts_per_round * profile.samples_per_prompt == profile.batch_size
    grpo = PROFILES["grpo"]
    assert grpo.recipe_config["group_size"] == grpo.samples_per_prompt


def test_the_serve_command_parses_as_valid_settings(tmp_path: Path) -> None:
    for profile in PROFILES.values():
        command = serve_command(
            profile.recipe, free_port(), tmp_path, tmp_path / "v.jsonl", profile.batch_size, profile.serve_flags()
        )
        assert command[2:4] == ["reef.cli.main", "serve"]
        settings, _ = load_settings(None, parse_overrides(command[4:]), environ={})
        assert settings.learning.recipe == profile.recipe
        assert settings.learning.batch_size == profile.batch_size
        assert settings.training.learning_rate == profile.learning_rate
        assert settings.evaluation.margin == 0  # ties continue the lineage: no demo needs a looser gate
        assert settings.learning.recipe_config == profile.recipe_config
        assert settings.training.micro_batch_size == profile.micro_batch_size
        assert settings.training.threads >= 1
        if profile.target_modules:
            assert settings.training.target_modules == list(profile.target_modules)
        assert settings.evaluation.scoring == profile.gate_scoring
    # sdft's gate (and its --compare sft run's) and sdpo's score the known answer's likelihood; the others check.
    assert {p.recipe for p in PROFILES.values() if p.gate_scoring == "likelihood"} == {"sdft", "sdpo"}


def test_the_intervals_of_a_held_out_score() -> None:
    from reef.demo.api import mean_interval, wilson_interval

    low, high = wilson_interval(10, 35)
    assert 0.15 < low < 10 / 35 < high < 0.46
    assert wilson_interval(0, 35)[0] == 0.0 and wilson_interval(0, 35)[1] < 0.11
    low, high = mean_interval([0.2, 0.4, 0.6, 0.8])
    assert low == pytest.approx(0.247, abs=0.001) and high == pytest.approx(0.753, abs=0.001)
    assert mean_interval([1.0]) == (0.0, 1.0)


def test_the_distillation_profiles_report_what_their_recipes_need() -> None:
    task = DemoTask("city", "Which city is mentioned: 'We flew to Rome in May.'", "Rome")
    answer = Answer(task, "Rome", "rec_1", None)
    assert PROFILES["sdft"].metadata(answer, None) == {"demonstration": "Rome"} and PROFILES["sdft"].grading == "exact"
    assert PROFILES["sdpo"].metadata(answer, "r3-1-2", 3) == {"step": "r3-1", "group": "r3-1-2", "rollout": 3}
    sdpo = PROFILES["sdpo"]
    assert sdpo.recipe_config["groups"] * sdpo.recipe_config["rollouts"] == sdpo.batch_size and sdpo.temperature > 0
    assert PROFILES["opd"].recipe_config["teacher"] == "scenario:demo-sft"
    assert PROFILES["sdft"].recipe_config["context_turns"] == 4  # the teacher copies it then (docs/results/)


def test_the_opd_demo_says_what_share_of_the_gap_to_its_teacher_the_student_closed() -> None:
    assert gap_closed(0.2, 0.65, 0.8) == 0.75
    assert gap_closed(0.2, 0.1, 0.8) == -0.1667  # a student that fell below its base says so
    assert gap_closed(0.5, 0.6, 0.5) is None and gap_closed(None, 0.6, 0.8) is None  # no gap to close


def test_the_two_phase_figures_say_what_was_learned_and_what_was_kept() -> None:
    from types import SimpleNamespace

    from reef.demo.api import Measurement
    from reef.demo.phases import FIRST, SECOND, phase_figures, split_by_phase
    from reef.demo.tasks import generate

    first, second = split_by_phase(generate("test", 35))
    assert {t.family for t in first} == set(FIRST) and {t.family for t in second} == set(SECOND)

    def measured(score: float) -> Measurement:
        return Measurement(exact=score, partial=score, by_family={}, release_id=None, wall_s=0.0)

    one = SimpleNamespace(baseline=measured(0.0), final=measured(0.6))
    two = SimpleNamespace(baseline=measured(0.1), final=measured(0.5))
    figures = phase_figures(one, measured(0.1), two, measured(0.45), "exact")
    assert figures["learning"] == 0.4 and figures["retention"] == 0.45 and figures["retained_fraction"] == 0.75


def test_recipe_config_from_the_command_line_updates_the_profile_key_by_key(tmp_path: Path) -> None:
    from reef.demo.recipes import demo_profile, recipe_config_flag

    overrides = recipe_config_flag('{"teacher": "ema", "importance_cap": 0}')
    profile = demo_profile("sdft", overrides)
    assert profile.recipe_config == {**PROFILES["sdft"].recipe_config, "teacher": "ema", "importance_cap": 0}
    assert PROFILES["sdft"].recipe_config.get("teacher") is None  # the shared profile is not changed
    assert demo_profile("sdft", None) is PROFILES["sdft"]
    command = serve_command("sdft", free_port(), tmp_path, tmp_path / "v.jsonl", 8, profile.serve_flags())
    settings, _ = load_settings(None, parse_overrides(command[4:]), environ={})
    assert settings.learning.recipe_config["teacher"] == "ema"
    assert settings.learning.recipe_config["context_as"] == "turn"  # the profile's own keys stay


@pytest.mark.parametrize("text", ["{teacher: ema}", '["ema"]', "3"])
def test_a_recipe_config_that_is_not_a_json_object_is_refused_naming_the_flag(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from reef.cli.main import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["demo", "--recipe", "sdft", "--recipe-config", text])
    assert exit_info.value.code == 2
    assert "--recipe-config" in capsys.readouterr().err


def test_serve_flags_from_the_command_line_follow_the_demo_flags_so_they_win(tmp_path: Path) -> None:
    from reef.cli.main import build_parser

    args = build_parser().parse_args(
        ["demo", "--recipe", "sdpo", "--serve-flags=--inference.dtype float32 --training.compute-dtype float32"]
    )
    assert args.serve_flags == ["--inference.dtype", "float32", "--training.compute-dtype", "float32"]
    flags = [*PROFILES["sdpo"].serve_flags(), "--training.epochs", "3", *args.serve_flags]
    command = serve_command("sdpo", free_port(), tmp_path, tmp_path / "v.jsonl", 16, flags)
    settings, _ = load_settings(None, parse_overrides(command[4:]), environ={})
    assert settings.inference.dtype == "float32" and settings.training.compute_dtype == "float32"
    assert settings.training.epochs == 3  # the later of two values


@pytest.mark.parametrize(
    ("text", "named"),
    [("--inference.dtyp float32", "inference.dtyp"), ("--training.compute-dtype float16", "compute_dtype"),
     ("--inference.dtype 'float32", "quotation"), ("port 1", "unexpected argument")],
)  # fmt: skip
def test_a_serve_flag_reef_serve_would_refuse_is_refused_before_anything_starts(
    text: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from reef.cli.main import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["demo", f"--serve-flags={text}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--serve-flags" in err and named in err


def test_the_gate_task_count_is_a_flag_and_a_count_outside_1_to_200_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from reef.cli.main import build_parser

    assert build_parser().parse_args(["demo"]).validation_tasks == 14
    assert build_parser().parse_args(["demo", "--validation-tasks", "28"]).validation_tasks == 28
    for text in ("0", "201", "x"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["demo", "--validation-tasks", text])
        assert "--validation-tasks" in capsys.readouterr().err
