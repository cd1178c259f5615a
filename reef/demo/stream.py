"""`reef demo --stream`: lessons taught one after another to one scenario, every earlier lesson measured after each.

Each lesson is its own invented catalogue (`reef.demo.catalogue`, a seed per lesson) of `LESSON_CODES` codes, with
its own splits: its training prompts, its validation split (added to the gate's tasks when it is taught, tagged
with its lesson, through `POST /reef/scenarios/{s}/tasks`) and its held-out test split. After a lesson's rounds,
the held-out split of every lesson so far is measured on the serving release: one row of the matrix
`reef.demo.stream_metrics` scores.

The same stream runs once per arm (`ARMS`), each in a fresh `reef serve` and state directory: `guarded` (`sft`
as `reef serve` gives it, the retention guard and rehearsal on), `plain` (plain sequential `sft`: both turned off)
and `sdft` (the recipe designed for retention). An arm's own
`reef serve` flags are `Arm.serve_flags`, and nowhere else.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from reef.demo import catalogue
from reef.demo.api import ReefAPI
from reef.demo.recipes import PROFILES, RecipeProfile
from reef.demo.result import DemoRun
from reef.demo.rounds import MEASURE_MAX_TOKENS, run_rounds
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, ServerFailed, free_port, serve_command, unwind_on_sigterm
from reef.demo.stream_metrics import TRANSFER_ALONE, stream_figures
from reef.demo.stream_report import finish_stream
from reef.demo.suites import Suite
from reef.demo.tasks import DemoTask

LESSONS = 4
LESSON_CODES = 12  # codes per lesson: 36 training prompts (three phrasings), 24 held-out, 12 for the gate
LESSON_SEEDS_APART = 1000  # lesson k of stream seed s is the catalogue of seed s * 1000 + k


@dataclasses.dataclass(frozen=True, slots=True)
class Arm:
    """One arm of the stream: the recipe and the `reef serve` flags it adds to the demo's own."""

    name: str
    recipe: str
    serve_flags: tuple[str, ...]
    summary: str


ARMS: dict[str, Arm] = {
    "guarded": Arm(
        "guarded",
        "sft",
        (),
        "sft as reef serve gives it: the retention guard (64 items) and rehearsal (a share of 0.75, two passes) on",
    ),
    "plain": Arm(
        "plain",
        "sft",
        ("--evaluation.retention-items", "0", "--learning.rehearsal-share", "0"),
        "plain sequential sft: the retention guard and rehearsal turned off",
    ),
    "sdft": Arm("sdft", "sdft", (), "sdft (the recipe designed for retention) with the settings reef serve gives"),
}


def _whole_number(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number is needed, not {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"from {low} to {high} {what}, not {value}")
    return value


def lesson_count_flag(text: str) -> int:
    """`--lessons`' value: a whole number from 2 to 20."""
    return _whole_number(text, 2, 20, "lessons")


def lesson_codes_flag(text: str) -> int:
    """`--lesson-codes`' value: a whole number from 4 to 40."""
    return _whole_number(text, 4, 40, "codes a lesson")


def arms_flag(text: str) -> list[str]:
    """`--arms`' value: arm names separated by commas, each once."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ARMS]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"arms separated by commas, each once, from {', '.join(ARMS)}; not {text!r}")
    return names


# Every demonstration of a lesson in one batch (`stream_settings`), four epochs a step, two steps a lesson: each fact
# is shown 24 times (three phrasings), as in the catalogue suite's settings, on a third of its facts.
STREAM_SETTINGS: dict[str, Any] = {
    "micro_batch_size": 4,
    "epochs": 4,
    "learning_rate": 1e-3,
    "rounds": 2,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Lesson:
    """One lesson of the stream: its catalogue's seed, its suite (training prompts) and its held-out splits."""

    index: int
    seed: int
    suite: Suite
    test: list[DemoTask]
    validation: list[DemoTask]
    codes: int = LESSON_CODES

    def to_json(self) -> dict[str, Any]:
        return {
            "lesson": self.index + 1,
            "catalogue_seed": self.seed,
            "codes": self.codes,
            "test_tasks": len(self.test),
            "validation_tasks": len(self.validation),
        }


def lessons_of(seed: int, count: int, codes: int = LESSON_CODES) -> list[Lesson]:
    """The stream's `count` lessons at `seed`: a catalogue of `codes` codes each, from seeds that never repeat."""
    lessons = []
    for index in range(count):
        lesson_seed = seed * LESSON_SEEDS_APART + index
        generate = functools.partial(_generate, codes=codes)
        suite = Suite("catalogue", generate, catalogue.instruction)
        lessons.append(
            Lesson(index, lesson_seed, suite, generate("test", 2 * codes, lesson_seed),
                   generate("validation", codes, lesson_seed), codes)
        )  # fmt: skip
    return lessons


def _generate(split: str, count: int, seed: int, codes: int) -> list[DemoTask]:
    return catalogue.generate(split, count, seed, codes)


def stream_settings(codes: int) -> dict[str, Any]:
    """`STREAM_SETTINGS` for lessons of `codes` codes: a round's prompts and the learner's batch are every
    demonstration of the lesson (three phrasings)."""
    return {**STREAM_SETTINGS, "prompts_per_round": 3 * codes, "batch_size": 3 * codes}


def stream_profile(recipe: str, codes: int = LESSON_CODES) -> RecipeProfile:
    """`recipe`'s demo profile with the stream's lesson-sized batches."""
    return dataclasses.replace(PROFILES[recipe], **stream_settings(codes))


@dataclasses.dataclass
class ArmRun:
    """What one arm measured: the matrix (a row per lesson taught) and each lesson's score before it was taught."""

    arm: Arm
    matrix: list[list[float]] = dataclasses.field(default_factory=list)
    before: list[float] = dataclasses.field(default_factory=list)
    rounds: list[list[dict[str, Any]]] = dataclasses.field(default_factory=list)
    serve_command: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    startup_s: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.arm.recipe,
            "summary": self.arm.summary,
            "serve_flags": list(self.arm.serve_flags),
            "before": self.before,
            **stream_figures(self.matrix),
            "rounds": self.rounds,
            "published": sum(1 for lesson in self.rounds for r in lesson if r.get("verdict") == "published"),
            "wall_s": round(self.wall_s, 1),
            "startup_s": round(self.startup_s, 1),
            "serve_command": self.serve_command,
            "error": self.error,
        }


async def teach_lessons(
    arm_run: ArmRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    url: str,
    lessons: list[Lesson],
    console: Console,
) -> None:
    """Teach `lessons` in order to one scenario at `url`; after each, measure every lesson so far into the matrix."""
    api = ReefAPI(url, f"demo-{profile.recipe}")
    try:
        for lesson in lessons:
            console.print(f"  [bold]lesson {lesson.index + 1}/{len(lessons)}[/] (catalogue seed {lesson.seed})")
            await api.add_tasks(
                [{**t.to_evaluation_row(profile.grading), "lesson": lesson.index + 1} for t in lesson.validation]
            )
            run = DemoRun(recipe=profile.recipe, metric=profile.grading, suite="catalogue")
            lesson_args = argparse.Namespace(
                rounds=args.rounds or profile.rounds, time_budget=args.time_budget, seed=lesson.seed,
                sample_from="serving", controls=False, suite=lesson.suite,
            )  # fmt: skip
            await run_rounds(run, profile, lesson_args, url, lesson.test, console, time.monotonic())
            assert run.baseline is not None and run.final is not None  # run_rounds measures before its rounds
            row = [(await api.measure(e.test, MEASURE_MAX_TOKENS)).score(run.metric) for e in lessons[: lesson.index]]
            arm_run.before.append(run.baseline.score(run.metric))
            arm_run.rounds.append(run.rounds)
            arm_run.matrix.append([*row, run.final.score(run.metric)])
            shown = " ".join(f"{score:.2f}" for score in arm_run.matrix[-1])
            console.print(
                f"  after lesson {lesson.index + 1}: held-out {run.metric} of lessons 1–{lesson.index + 1}: {shown}"
            )
    finally:
        await api.aclose()


def serve_arm(arm: Arm, args: argparse.Namespace, lessons: list[Lesson], state_dir: Path, console: Console) -> ArmRun:
    """Run the stream for `arm` in its own `reef serve` on `state_dir`; what it measured (`error` set if it failed)."""
    started = time.monotonic()
    arm_run = ArmRun(arm)
    profile = stream_profile(arm.recipe, lessons[0].codes)
    state_dir.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    no_file_tasks = state_dir / "gate-tasks.jsonl"  # the gate's tasks come through the API, lesson by lesson
    no_file_tasks.write_text("", encoding="utf-8")
    flags = [*profile.serve_flags(args.learning_rate, args.epochs), *arm.serve_flags, *args.serve_flags]
    command = serve_command(profile.recipe, port, state_dir, no_file_tasks, profile.batch_size, flags)
    arm_run.serve_command = command[2:]
    console.print(f"[bold]arm {arm.name}[/]: {arm.summary} · state {state_dir} · {url}")
    server = ReefServer(command, url, state_dir / "serve.log")
    try:
        with server:
            arm_run.startup_s = server.wait_healthy(STARTUP_TIMEOUT_S)
            asyncio.run(teach_lessons(arm_run, profile, args, url, lessons, console))
    except ServerFailed as exc:
        arm_run.error = str(exc)
        console.print(f"[red]reef demo: {exc}[/]")
    except KeyboardInterrupt:
        arm_run.error = "interrupted"
    except Exception as exc:  # keep what was measured so far, then go on to the next arm
        arm_run.error = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]arm {arm.name} failed: {arm_run.error}[/]\n{server.log_tail(15)}")
    arm_run.wall_s = time.monotonic() - started
    return arm_run


def run_stream_demo(args: argparse.Namespace) -> int:
    """`reef demo --stream`: every arm of `args.arms` through the same lessons; prints and reports the figures."""
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    if getattr(args, "seeds", 1) > 1:
        console.print("[red]reef demo --stream runs at one seed (--seed); run it once per seed instead of --seeds[/]")
        return 2
    unwind_on_sigterm()
    started = time.monotonic()
    codes = args.lesson_codes
    lessons = lessons_of(args.seed, args.lessons, codes)
    root = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-stream-"))
    console.print(
        f"[bold]reef demo --stream[/] · {len(lessons)} lessons of {codes} invented codes each · "
        f"arms {', '.join(args.arms)}"
    )
    runs: list[ArmRun] = []
    for name in args.arms:
        runs.append(serve_arm(ARMS[name], args, lessons, root / name, console))
        if runs[-1].error == "interrupted":
            break
    if not args.keep_state and args.state_dir is None:
        shutil.rmtree(root, ignore_errors=True)
    result = stream_result(runs, lessons, args, time.monotonic() - started)
    finish_stream(result, args, console)
    if any(r.error == "interrupted" for r in runs):
        return 130
    return 1 if result["error"] or any(len(r.matrix) < len(lessons) for r in runs) else 0


def stream_result(runs: list[ArmRun], lessons: list[Lesson], args: argparse.Namespace, wall_s: float) -> dict[str, Any]:
    """The `--json` document of a stream: the settings, and every arm's figures under `stream.arms`."""
    return {
        "mode": "stream",
        "suite": "catalogue",
        "metric": "exact",
        "seed": args.seed,
        "stream": {
            "lessons": [lesson.to_json() for lesson in lessons],
            "transfer_alone": TRANSFER_ALONE,
            "arms": {run.arm.name: run.to_json() for run in runs},
        },
        "settings": {
            **stream_settings(lessons[0].codes),
            "rounds": args.rounds or STREAM_SETTINGS["rounds"],
            "learning_rate": args.learning_rate or STREAM_SETTINGS["learning_rate"],
            "epochs": args.epochs or STREAM_SETTINGS["epochs"],
            "time_budget_s_per_lesson": args.time_budget,
            "serve_flags": list(args.serve_flags),
        },
        "wall_s": round(wall_s, 1),
        "error": next((f"{r.arm.name}: {r.error}" for r in runs if r.error), None),
    }
