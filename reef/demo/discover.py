"""`reef discover PROBLEM`: search one problem with a model that trains on its own attempts, on the embedded defaults.

It starts `reef serve` (SmolLM2, SQLite, local git) with a discovery recipe and drives the search through the API
(`reef.demo.discover_search`), printing each step's best, mean and valid fraction. With `--control` it then runs two
control arms for as many steps as the trained search made, each on a fresh server, inside the same time budget: the
frozen model (recipe setting `train: false`: the archive grows, the weights stay the base model's) and a random
policy over the same edit menu (where the problem's edits can be enumerated). Each arm has its best-so-far curve.
With `--seeds K` the whole command runs K times (the random policy's draws seeded by each seed) and reports means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from reef.demo.discover_report import write_discover_report
from reef.demo.discover_search import Policy, SearchClient, SearchRun, no_reserve, run_search
from reef.demo.seeds import seed_interval
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, ServerFailed, free_port, unwind_on_sigterm
from reef.discovery.evaluation import EvaluatorFailure
from reef.discovery.problem import Problem, ProblemError, load_problem
from reef.sandbox import Limits

RECIPES = ("tttd", "tttd-mean", "guidance_ttt")
SCENARIO = "discover"


def run_discover(args: argparse.Namespace) -> int:
    """`reef discover`: one search (and its controls), or with `--seeds K` K of them and their means."""
    unwind_on_sigterm()
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    seeds = list(range(args.seed, args.seed + args.seeds))
    outcomes = [discover_once(argparse.Namespace(**{**vars(args), "seed": seed}), console) for seed in seeds]
    code = next((c for c, _ in outcomes if c), 0)
    result = outcomes[0][1] if len(seeds) == 1 else seed_means([r for _, r in outcomes], seeds)
    if args.report:
        write_discover_report(args.report, result)
    print(json.dumps(result, indent=None if args.json else 2), file=sys.stdout)
    return code


def seed_means(results: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Means over the seeds of the seed's best, the trained best and each control's best, with 95 % intervals over
    the seeds; each seed's result under `seeds`."""
    means: dict[str, Any] = {k: results[0].get(k) for k in ("problem", "recipe", "direction", "best_known", "grid")}
    for key in ("seed_best", "best", "control_best", "random_best"):
        values = [float(r[key]) for r in results if isinstance(r.get(key), int | float)]
        means[key] = round(statistics.fmean(values), 6) if values else None
        means[f"{key}_ci95"] = seed_interval(values)
    means.update(seed_values=seeds, seeds=results, error=next((r["error"] for r in results if r.get("error")), None))
    return means


def problem_option(text: str) -> tuple[str, Any]:
    """`--option KEY=VALUE`: VALUE as JSON (`n=6` is a number) or else as text (`answer=list`, `moves=fine`)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise ValueError(f"--option {text!r}: expected KEY=VALUE")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def discover_once(args: argparse.Namespace, console: Console) -> tuple[int, dict[str, Any]]:
    """One search at `args.seed` and, with `--control`, its control arms: (exit code, the result)."""
    started = time.monotonic()
    try:
        groups, rollouts = (int(x) for x in args.grid.lower().split("x"))
        options = dict(problem_option(text) for text in args.option)
        problem = load_problem(args.problem, options)
    except (ValueError, ProblemError) as error:
        console.print(f"[red]reef discover: {error}[/]")
        return 2, {"error": str(error)}
    root = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-discover-"))
    result: dict[str, Any] = {"problem": problem.name, "recipe": args.recipe, "direction": problem.direction}
    result["seed"] = args.seed
    result["best_known"], result["best_known_source"] = problem.best_known, problem.best_known_source
    result["options"] = problem.options
    deadline = started + args.time_budget
    runs: list[SearchRun] = []
    code = 0
    try:
        # With a control, the trained search keeps in reserve what the control will need for as many steps (the
        # same asking and evaluating, no training): both searches then run the same number of steps.
        randomizable = bool(problem.seeds) and problem.useful_edits(problem.seeds[0]) is not None
        controls = (2 if randomizable else 1) if args.control else 0
        runs.append(
            _search(args, problem, groups, rollouts, "trained", args.steps, deadline, root / "trained", console,
                    _reserve_for(controls))
        )  # fmt: skip
        if args.control:
            steps = len(runs[0].steps)
            runs.append(_search(args, problem, groups, rollouts, "frozen", steps, deadline, root / "control", console,
                                _reserve_for(controls - 1)))  # fmt: skip
            if randomizable:
                runs.append(_search(args, problem, groups, rollouts, "random", steps, deadline, root / "random",
                                    console))  # fmt: skip
            else:
                result["random_note"] = "the problem's edits cannot be enumerated: no random policy over them"
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
    randomly = runs[2] if len(runs) > 2 else None
    result.update(
        random_best=randomly.best if randomly else None,
        random_steps=len(randomly.steps) if randomly else None,
        random_curve=randomly.curve if randomly else [],
        curves={
            "trained": trained.curve if trained else [],
            "frozen": control.curve if control else [],
            "random": randomly.curve if randomly else [],
        },
    )
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
    return code, result


def _reserve_for(arms: int) -> Callable[[SearchRun], float]:
    """What a search keeps in reserve for `arms` control searches after it, each as long as a frozen one."""
    if arms <= 0:
        return no_reserve
    return lambda run: arms * run.control_estimate()


def _search(
    args: argparse.Namespace,
    problem: Problem,
    groups: int,
    rollouts: int,
    policy: Policy,
    steps: int,
    deadline: float,
    state_dir: Path,
    console: Console,
    reserve: Callable[[SearchRun], float] = no_reserve,
) -> SearchRun:
    started = time.monotonic()
    trains = policy == "trained"
    run = SearchRun(recipe=args.recipe, trains=trains, policy=policy)
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
    label = {"trained": "trained", "frozen": "control (training off)", "random": "control (random policy)"}[policy]
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
                        seed=args.seed,
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
