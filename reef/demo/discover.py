"""`reef discover PROBLEM`: search one problem with a model that trains on its own attempts, on the embedded defaults.

It starts `reef serve` (SmolLM2, SQLite, local git) with a discovery recipe and drives the search through the API
(`reef.demo.discover_search`), printing each step's best, mean and valid fraction. With `--control` it then runs the
same search with training off (recipe setting `train: false`: the archive grows, the weights stay the base model's)
for as many steps as the trained search made, on a fresh server, so both searches see the same budget of attempts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from reef.demo.discover_report import write_discover_report
from reef.demo.discover_search import SearchClient, SearchRun, no_reserve, run_search
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, ServerFailed, free_port, unwind_on_sigterm
from reef.discovery.evaluation import EvaluatorFailure
from reef.discovery.problem import Problem, ProblemError, load_problem
from reef.sandbox import Limits

RECIPES = ("tttd", "tttd-mean", "guidance_ttt")
SCENARIO = "discover"


def run_discover(args: argparse.Namespace) -> int:
    started = time.monotonic()
    unwind_on_sigterm()
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    try:
        groups, rollouts = (int(x) for x in args.grid.lower().split("x"))
        options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.option)}
        problem = load_problem(args.problem, options)
    except (ValueError, ProblemError) as error:
        console.print(f"[red]reef discover: {error}[/]")
        return 2
    root = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-discover-"))
    result: dict[str, Any] = {"problem": problem.name, "recipe": args.recipe, "direction": problem.direction}
    result["best_known"], result["best_known_source"] = problem.best_known, problem.best_known_source
    result["options"] = problem.options
    deadline = started + args.time_budget
    runs: list[SearchRun] = []
    code = 0
    try:
        # With a control, the trained search keeps in reserve what the control will need for as many steps (the
        # same asking and evaluating, no training): both searches then run the same number of steps.
        reserve = SearchRun.control_estimate if args.control else no_reserve
        runs.append(
            _search(args, problem, groups, rollouts, True, args.steps, deadline, root / "trained", console, reserve)
        )
        if args.control:
            steps = len(runs[0].steps)
            runs.append(_search(args, problem, groups, rollouts, False, steps, deadline, root / "control", console))
    except (ServerFailed, httpx.HTTPError, TimeoutError, EvaluatorFailure) as error:
        result["error"] = f"{type(error).__name__}: {error}"
        console.print(f"[red]reef discover failed: {result['error']}[/]")
        code = 1
    except KeyboardInterrupt:
        result["error"], code = "interrupted", 130
    finally:
        if args.state_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    trained = runs[0] if runs else None
    control = runs[1] if len(runs) > 1 else None
    result.update(
        seed_best=trained.seed_best if trained else None,
        best=trained.best if trained else None,
        control_best=control.best if control else None,
        steps=len(trained.steps) if trained else 0,
        control_steps=len(control.steps) if control else None,
        valid_fraction=trained.valid_fraction() if trained else None,
        control_valid_fraction=control.valid_fraction() if control else None,
        parsed_fraction=trained.parsed_fraction() if trained else None,
        control_parsed_fraction=control.parsed_fraction() if control else None,
        copy_fraction=trained.copy_fraction() if trained else None,
        control_copy_fraction=control.copy_fraction() if control else None,
        curve=trained.curve if trained else [],
        control_curve=control.curve if control else [],
        best_solution=trained.best_solution if trained else None,
        control_best_solution=control.best_solution if control else None,
        grid=f"{groups}x{rollouts}",
        wall_s=round(time.monotonic() - started, 1),
    )
    if args.report:
        write_discover_report(args.report, result, trained, control)
    print(json.dumps(result, indent=None if args.json else 2), file=sys.stdout)
    return code


def _search(
    args: argparse.Namespace,
    problem: Problem,
    groups: int,
    rollouts: int,
    trains: bool,
    steps: int,
    deadline: float,
    state_dir: Path,
    console: Console,
    reserve: Callable[[SearchRun], float] = no_reserve,
) -> SearchRun:
    started = time.monotonic()
    run = SearchRun(recipe=args.recipe, trains=trains)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = {
        "problem": args.problem,
        "problem_options": problem.options,
        "groups": groups,
        "rollouts": rollouts,
        "train": trains,
    }
    command = [
        sys.executable, "-m", "reef.cli.main", "serve",
        "--inference.model-path", "smollm2",
        "--learning.recipe", args.recipe,
        "--learning.recipe-config", json.dumps(config),
        "--learning.mode", "auto",
        "--learning.poll-interval-s", "0.5",
        "--training.learning-rate", repr(args.learning_rate),
        "--training.epochs", "1",
        "--training.micro-batch-size", "4",
        "--storage.dir", str(state_dir),
        "--reef.port", str(port),
    ]  # fmt: skip
    label = "trained" if trains else "control (training off)"
    console.print(f"[bold]reef discover[/] · {problem.name} · {args.recipe} · {label} · {url}")
    with ReefServer(command, url, state_dir / "serve.log") as server:
        server.wait_healthy(STARTUP_TIMEOUT_S)
        run.startup_s = time.monotonic() - started

        def on_step(entry: dict[str, Any]) -> None:
            console.print(
                f"  step {entry['step']}: best {_fmt(entry['best'])} · step best {_fmt(entry['step_best'])}"
                f" · mean {_fmt(entry['step_mean'])} · valid {entry['valid']}/{entry['attempts']}"
                f" · parsed {entry['parsed']} · copies {entry['copies']} · {entry['wall_s']} s"
            )

        async def drive() -> None:
            client = SearchClient(url, SCENARIO)
            try:
                with console.status(f"searching ({label}) …"):
                    await run_search(
                        client,
                        problem,
                        run,
                        groups=groups,
                        steps=steps,
                        deadline=deadline,
                        temperature=args.temperature,
                        max_tokens=args.max_tokens,
                        limits=Limits(),
                        on_step=on_step,
                        reserve=reserve,
                    )
            finally:
                await client.aclose()

        try:
            asyncio.run(drive())
        except Exception:
            console.print(server.log_tail(15))
            raise
    run.wall_s = time.monotonic() - started
    console.print(f"  seed {_fmt(run.seed_best)} → best {_fmt(run.best)} in {len(run.steps)} steps, {run.wall_s:.0f} s")
    return run


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"
