"""`reef demo`: watch Reef learn, end to end, on the embedded defaults (SmolLM2, SQLite, local git).

It starts `reef serve`, measures a held-out test set through the API, then for each round sends training
prompts, grades the answers, reports the grades, waits for the learner to train → evaluate → publish → go
live, and measures the held-out set again. Three disjoint splits (`demo_tasks`): training prompts, a
validation split the learner's evaluation gate uses, and the test split the reported score comes from. The
rounds are `demo_rounds`; what was measured, and how it is shown, is `demo_result`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from reef.demo.distillation import TEACHER_SCENARIO, gap_closed, teacher_kl_figures
from reef.demo.phases import two_phases
from reef.demo.recipes import (
    HARNESS_METHODS,
    ONE_LESSON_FLAGS,
    PROFILES,
    RecipeProfile,
    demo_profile,
)
from reef.demo.result import DemoRun, finish
from reef.demo.rounds import MEASURE_MAX_TOKENS, run_rounds
from reef.demo.seeds import finish_seeds, run_seeds
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, ServerFailed, free_port, serve_command, unwind_on_sigterm
from reef.demo.suites import suite_named
from reef.demo.tasks import DemoTask

TEST_TASKS = 35  # five per family
VALIDATION_TASKS = 14  # two per family: the gate runs every step, twice (candidate and current)


def run_demo(args: argparse.Namespace) -> int:
    """`reef demo`: one run at `--seed`, or with `--seeds K` one per seed and their means; prints the result."""
    unwind_on_sigterm()
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    if getattr(args, "seeds", 1) > 1:
        code, result = run_seeds(args, console, one_run)
        finish_seeds(result, args, console)
        return code
    code, run = one_run(args, console)
    finish(run, args, console)
    return code


def one_run(args: argparse.Namespace, console: Console) -> tuple[int, DemoRun]:
    """One whole demo at `args.seed` (its task instances generated from it): (exit code, what it measured)."""
    if args.recipe == "openclawrl":  # sessions with a simulated user instead of graded reports
        from reef.demo.openclawrl import openclawrl_run

        return openclawrl_run(args, console)
    started = time.monotonic()
    feedback = getattr(args, "feedback", "recipe")
    profile = demo_profile(args.recipe, args.recipe_config, getattr(args, "suite", "skills"), feedback)
    args.rounds = args.rounds or profile.rounds
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-demo-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    suite = suite_named(getattr(args, "suite", "skills"), feedback)
    validation = suite.generate("validation", args.validation_tasks, args.seed)
    test = suite.generate("test", TEST_TASKS, args.seed)
    _write_jsonl(state_dir / "test.jsonl", [t.to_evaluation_row() for t in test])
    harness = profile.recipe in HARNESS_METHODS
    run = DemoRun(recipe=profile.recipe, metric=profile.grading, suite=suite.name, harness=harness)
    code = 0
    if profile.recipe == "opd":  # the teacher: an sft release on the same base, trained here first
        console.print(f"[bold]opd teacher[/]: training scenario {TEACHER_SCENARIO} with sft from the same base first")
        teacher = DemoRun(recipe="sft", metric="exact")
        teacher_args = argparse.Namespace(**{**vars(args), "rounds": args.teacher_rounds, "learning_rate": None})
        teacher_started = time.monotonic()
        code = _serve(
            teacher, PROFILES["sft"], teacher_args, state_dir, port, validation, test, console, teacher_started
        )
        teacher.wall_s = time.monotonic() - teacher_started
        run.extra["teacher"] = teacher.final.score("partial") if teacher.final else None
        run.extra["teacher_exact"] = teacher.final.exact if teacher.final else None
        run.extra["teacher_run"] = teacher.to_json()
    if code == 0:  # the time budget covers this recipe's rounds (opd: not its teacher's)
        code = _serve(run, profile, args, state_dir, port, validation, test, console, time.monotonic())
    if profile.recipe == "opd" and run.final is not None:
        baseline = run.baseline.score("partial") if run.baseline else None
        run.extra["gap_closed"] = closed = gap_closed(baseline, run.final.score("partial"), run.extra.get("teacher"))
        if closed is not None:
            console.print(f"  the student closed {closed:.0%} of the gap between the base and the teacher")
        else:
            console.print("  [yellow]the teacher scores no higher than the base: there is no gap to close[/]")
        run.extra["teacher_reverse_kl"] = teacher_kl_figures(state_dir, test, MEASURE_MAX_TOKENS, console)
    if args.compare == "sft" and profile.recipe == "sdft" and code == 0:
        code = _compare(run, args, state_dir, validation, test, console)
    if harness and getattr(args, "controls", False) and code == 0:
        code = _fallback_control(run, profile, args, state_dir, validation, test, console)
    run.wall_s = time.monotonic() - started
    if not args.keep_state and args.state_dir is None:
        shutil.rmtree(state_dir, ignore_errors=True)
    return (code if run.error or run.final is not None else 1), run


def _fallback_control(
    run: DemoRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    state_dir: Path,
    validation: list[DemoTask],
    test: list[DemoTask],
    console: Console,
) -> int:
    """`controls.fallback`: the same method with its proposer off, from the base, on the same tasks, for as many
    rounds as the method ran (its own time budget)."""
    console.print(f"[bold]control[/]: {profile.recipe} with its proposer off (the deterministic fallback alone)")
    (state_dir / "control-fallback").mkdir(parents=True, exist_ok=True)
    off = dataclasses.replace(profile, recipe_config={**profile.recipe_config, "proposer": "off"})
    other = DemoRun(recipe=profile.recipe, metric=run.metric, suite=run.suite, harness=True)
    control_args = argparse.Namespace(**{**vars(args), "rounds": max(len(run.rounds), 1)})
    code = _serve(other, off, control_args, state_dir / "control-fallback", free_port(), validation, test, console,
                  time.monotonic())  # fmt: skip
    if other.final is not None:
        run.controls["fallback"] = other.final
    run.extra["fallback_rounds"] = other.rounds
    return code


def _serve(
    run: DemoRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    state_dir: Path,
    port: int,
    validation: list[DemoTask],
    test: list[DemoTask],
    console: Console,
    started: float,
) -> int:
    """Serve `profile`'s recipe on `state_dir`, measure, run the training rounds; the exit code (0: ran)."""
    url = f"http://127.0.0.1:{port}"
    tasks_path = state_dir / f"validation-{profile.recipe}.jsonl"
    _write_jsonl(tasks_path, [t.to_evaluation_row(profile.grading) for t in validation])
    # Two phases of task families (its --compare sft run too); a suite without families runs one.
    phases = args.recipe == "sdft" and not args.single_phase and run.suite == "skills"
    one_lesson = () if phases else ONE_LESSON_FLAGS
    flags = [*profile.serve_flags(args.learning_rate, args.epochs), *one_lesson, *args.serve_flags]
    command = serve_command(profile.recipe, port, state_dir, tasks_path, profile.batch_size, flags)
    run.settings = {
        "suite": run.suite,
        "seed": args.seed,
        "rounds": args.rounds,
        "time_budget_s": args.time_budget,
        "sample_from": args.sample_from,
        "prompts_per_round": profile.prompts_per_round,
        "samples_per_prompt": profile.samples_per_prompt,
        "temperature": profile.temperature,
        "max_tokens": profile.max_tokens,
        "learning_rate": args.learning_rate or profile.learning_rate,
        "epochs": args.epochs or profile.epochs,
        "recipe_config": profile.recipe_config,
        "gate_scoring": profile.gate_scoring,
        "test_tasks": len(test),
        "validation_tasks": len(validation),
        "serve_command": command[2:],
    }
    console.print(f"[bold]reef demo[/] · recipe {profile.recipe} · state {state_dir} · {url}")
    scored = " (scored by how likely each side says the answer)" if profile.gate_scoring == "likelihood" else ""
    console.print(
        f"  {len(test)} held-out test tasks, {len(validation)} validation tasks for the learner's gate{scored}"
    )
    server = ReefServer(command, url, state_dir / f"serve-{profile.recipe}.log")
    code = 0
    try:
        with server:
            console.print("  starting reef serve (SmolLM2, SQLite, git) …")
            run.startup_s = server.wait_healthy(STARTUP_TIMEOUT_S)
            if phases:
                make_run = lambda: DemoRun(recipe=profile.recipe, metric=profile.grading)  # noqa: E731
                asyncio.run(two_phases(run_rounds, make_run, run, profile, args, url, test, console, started))
            else:
                asyncio.run(run_rounds(run, profile, args, url, test, console, started))
    except ServerFailed as exc:
        run.error = str(exc)
        console.print(f"[red]reef demo: {exc}[/]")
        code = 1
    except KeyboardInterrupt:
        run.error = "interrupted"
        code = 130
    except Exception as exc:  # report what was measured so far, then fail
        run.error = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]reef demo failed: {run.error}[/]\n{server.log_tail(15)}")
        code = 1
    return code


def _compare(
    run: DemoRun,
    args: argparse.Namespace,
    state_dir: Path,
    validation: list[DemoTask],
    test: list[DemoTask],
    console: Console,
) -> int:
    """The same stream with `sft` (fresh state, same tasks, the same gate); `retention` and `gains` side by side in
    `run.extra`."""
    console.print("[bold]--compare sft[/]: the same stream with sft, from the base")
    (state_dir / "compare-sft").mkdir(parents=True, exist_ok=True)
    other = DemoRun(recipe="sft", metric=run.metric)
    compare_started = time.monotonic()
    sft = dataclasses.replace(PROFILES["sft"], gate_scoring=PROFILES["sdft"].gate_scoring)
    code = _serve(other, sft, args, state_dir / "compare-sft", free_port(), validation, test, console,
                  compare_started)  # fmt: skip
    other.wall_s = time.monotonic() - compare_started
    runs = {"sdft": run, "sft": other}
    phases = {name: r.extra.get("phases") or {} for name, r in runs.items()}
    run.extra["retention"] = {name: p.get("retention") for name, p in phases.items()}
    run.extra["retained_fraction"] = {name: p.get("retained_fraction") for name, p in phases.items()}
    run.extra["gains"] = {name: r.to_json()["improvement"] for name, r in runs.items()}
    run.extra["compare_sft"] = other.to_json()
    return code


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
