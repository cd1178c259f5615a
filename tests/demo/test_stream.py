"""`reef demo --stream` against a fake server: the lessons go in order, the gate's tasks follow the lesson, every
lesson so far is measured after each, and each arm's own `reef serve` flags reach its command line."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from reef.cli.main import build_parser
from reef.core.settings import Settings
from reef.demo import stream
from reef.demo.api import Measurement
from reef.demo.result import DemoRun
from reef.demo.tasks import DemoTask


class World:
    """The fake model: a lesson scores 1.0 right after it is taught and loses 0.25 with each later lesson."""

    def __init__(self, lessons: list[stream.Lesson]) -> None:
        self.lessons = lessons
        self.taught = 0
        self.gate_tasks: list[list[dict[str, Any]]] = []

    def score(self, test: list[DemoTask]) -> float:
        index = next(lesson.index for lesson in self.lessons if lesson.test == test)
        return 0.0 if index >= self.taught else 1.0 - 0.25 * (self.taught - 1 - index)


def _measured(score: float) -> Measurement:
    return Measurement(exact=score, partial=score, by_family={}, release_id=None, wall_s=0.0)


def _install(monkeypatch: pytest.MonkeyPatch, world: World) -> None:
    class FakeAPI:
        def __init__(self, url: str, scenario: str) -> None:
            self.scenario = scenario

        async def add_tasks(self, rows: list[dict[str, Any]]) -> None:
            world.gate_tasks.append(rows)

        async def measure(self, tasks: list[DemoTask], max_tokens: int) -> Measurement:
            return _measured(world.score(tasks))

        async def aclose(self) -> None:
            return None

    async def run_rounds(run: DemoRun, profile: Any, args: argparse.Namespace, url: str, test: list[DemoTask],
                         console: Console, started: float) -> None:  # fmt: skip
        # The rounds train on this lesson's catalogue: its training prompts ask about the codes its test asks about.
        code = re.search(r"[A-Z]{2}-[0-9]{4}", args.suite.generate("train", 1, args.seed)[0].prompt)
        assert code is not None and any(code.group() in t.prompt for t in test)
        run.baseline = _measured(world.score(test))
        world.taught += 1
        run.final = _measured(world.score(test))
        run.rounds = [{"round": 1, "verdict": "published"}]

    monkeypatch.setattr(stream, "ReefAPI", FakeAPI)
    monkeypatch.setattr(stream, "run_rounds", run_rounds)


def test_every_lesson_so_far_is_measured_after_each_lesson_and_the_gate_judges_the_current_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lessons = stream.lessons_of(seed=7, count=3)
    world = World(lessons)
    _install(monkeypatch, world)
    arm_run = stream.ArmRun(stream.ARMS["plain"])
    args = argparse.Namespace(rounds=None, time_budget=600.0)
    console = Console(file=io.StringIO())
    asyncio.run(stream.teach_lessons(arm_run, stream.stream_profile("sft"), args, "http://fake", lessons, console))
    assert arm_run.matrix == [[1.0], [0.75, 1.0], [0.5, 0.75, 1.0]]
    assert arm_run.before == [0.0, 0.0, 0.0]
    # Each lesson's validation split joins the gate's tasks, in order, tagged with its lesson.
    assert [[row["answer"] for row in rows] for rows in world.gate_tasks] == [
        [t.answer for t in lesson.validation] for lesson in lessons
    ]
    assert [{row["lesson"] for row in rows} for rows in world.gate_tasks] == [{1}, {2}, {3}]
    figures = arm_run.to_json()
    assert figures["forgetting"] == [0.5, 0.25, None]
    assert figures["mean_forgetting"] == 0.375
    assert figures["final_over_peak"] == 0.75
    assert figures["published"] == 3


def test_lessons_are_distinct_catalogues_with_their_own_held_out_splits() -> None:
    lessons = stream.lessons_of(seed=0, count=4)
    prompts = [{t.prompt for t in lesson.test} for lesson in lessons]
    assert all(len(p) == 2 * stream.LESSON_CODES for p in prompts)
    assert all(a.isdisjoint(b) for i, a in enumerate(prompts) for b in prompts[i + 1 :])
    train = {t.prompt for t in lessons[0].suite.generate("train", 100, lessons[0].seed)}
    assert len(train) == 3 * stream.LESSON_CODES and train.isdisjoint(prompts[0])


def test_smaller_lessons_make_smaller_splits_and_batches() -> None:
    (lesson,) = stream.lessons_of(seed=0, count=2, codes=6)[:1]
    assert (len(lesson.test), len(lesson.validation), lesson.to_json()["codes"]) == (12, 6, 6)
    assert len({t.prompt for t in lesson.suite.generate("train", 100, lesson.seed)}) == 18
    profile = stream.stream_profile("sft", 6)
    assert profile.batch_size == profile.prompts_per_round == 18
    args = build_parser().parse_args(["demo", "--stream", "--lesson-codes", "6"])
    assert args.lesson_codes == 6 and build_parser().parse_args(["demo"]).lesson_codes == stream.LESSON_CODES


class FakeServer:
    commands: list[list[str]] = []
    failing: frozenset[str] = frozenset()

    def __init__(self, command: list[str], url: str, log_path: Path) -> None:
        self.command = command
        FakeServer.commands.append(command)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def wait_healthy(self, timeout_s: float) -> float:
        recipe = self.command[self.command.index("--learning.recipe") + 1]
        if recipe in FakeServer.failing:
            raise stream.ServerFailed(f"reef serve exited with code 2 ({recipe})")
        return 1.0

    def log_tail(self, lines: int = 30) -> str:
        return ""


def _demo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str], failing: frozenset[str] = frozenset()
) -> tuple[int, dict[str, Any], str]:
    world = World(stream.lessons_of(seed=0, count=4))
    _install(monkeypatch, world)
    monkeypatch.setattr(stream, "ReefServer", FakeServer)
    monkeypatch.setattr(stream, "unwind_on_sigterm", lambda: None)
    FakeServer.commands, FakeServer.failing = [], failing

    def restart_world(*args: Any) -> stream.ArmRun:
        world.taught = 0
        return serve_arm(*args)

    serve_arm = stream.serve_arm
    monkeypatch.setattr(stream, "serve_arm", restart_world)
    args = build_parser().parse_args(["demo", "--stream", "--json", "--state-dir", str(tmp_path / "state"),
                                      "--report", str(tmp_path / "stream.html"), *argv])  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    code = args.handler(args)
    return code, json.loads(out.getvalue()), (tmp_path / "stream.html").read_text(encoding="utf-8")


def test_each_arm_runs_the_same_stream_with_its_own_flags_and_reports_the_same_figures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, result, page = _demo(monkeypatch, tmp_path, ["--lessons", "4"])
    assert code == 0
    arms = result["stream"]["arms"]
    assert list(arms) == ["guarded", "plain", "sdft"]
    for arm in arms.values():
        assert arm["matrix"] == [[1.0], [0.75, 1.0], [0.5, 0.75, 1.0], [0.25, 0.5, 0.75, 1.0]]
        assert arm["mean_forgetting"] == 0.5 and arm["final_average"] == 0.625
    # `guarded` runs with `reef serve`'s defaults, which turn the guard and rehearsal on; `plain` turns both off.
    guarded, plain = FakeServer.commands[0], FakeServer.commands[1]
    assert "--evaluation.retention-items" not in guarded and "--learning.rehearsal-share" not in guarded
    defaults = Settings()
    assert defaults.evaluation.retention_items == 64 and defaults.learning.rehearsal_share == 0.75
    assert plain[plain.index("--evaluation.retention-items") + 1] == "0"
    assert plain[plain.index("--learning.rehearsal-share") + 1] == "0"
    assert FakeServer.commands[2][FakeServer.commands[2].index("--learning.recipe") + 1] == "sdft"
    # The report draws each arm's matrix and the curves.
    assert page.count("<svg") == 1 + 3 and page.count("after lesson 4</th>") == 3


def test_an_arm_whose_server_fails_is_reported_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, result, _ = _demo(monkeypatch, tmp_path, ["--arms", "sdft,plain"], failing=frozenset({"sdft"}))
    assert code == 1
    arms = result["stream"]["arms"]
    assert list(arms) == ["sdft", "plain"]
    assert "exited with code 2" in arms["sdft"]["error"] and arms["sdft"]["matrix"] == []
    assert len(arms["plain"]["matrix"]) == 4 and arms["plain"]["error"] is None
    assert result["error"].startswith("sdft:")


@pytest.mark.parametrize(
    "argv",
    [["--arms", "plain,bogus"], ["--arms", "plain,plain"], ["--lessons", "1"], ["--lesson-codes", "3"],
     ["--lesson-codes", "many"]],
)  # fmt: skip
def test_the_stream_options_refuse_what_they_cannot_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--stream", *argv])
    assert argv[0] in capsys.readouterr().err


def test_a_stream_refuses_several_seeds_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(stream, "ReefServer", FakeServer)
    FakeServer.commands = []
    args = build_parser().parse_args(["demo", "--stream", "--seeds", "2", "--state-dir", str(tmp_path)])
    assert args.handler(args) == 2
    assert FakeServer.commands == []
