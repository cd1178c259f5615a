"""`reef demo`: watch Reef learn, end to end, on the embedded defaults (SmolLM2, SQLite, local git).

It starts `reef serve`, measures a held-out test set through the API, then for each round sends training
prompts, grades the answers, reports the grades, waits for the learner to train → evaluate → publish → go
live, and measures the held-out set again. Three disjoint splits (`demo_tasks`): training prompts, a
validation split the learner's evaluation gate uses, and the test split the reported score comes from.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from reef.cli.demo_api import Answer, Measurement, ReefAPI
from reef.cli.demo_distillation import TEACHER_SCENARIO, teacher_kl_figures
from reef.cli.demo_phases import two_phases
from reef.cli.demo_recipes import PROFILES, RecipeProfile
from reef.cli.demo_report import write_report
from reef.cli.demo_server import ReefServer, ServerFailed, free_port, serve_command
from reef.cli.demo_tasks import DemoTask, generate, is_exact, training_rounds

TEST_TASKS = 35  # five per family
VALIDATION_TASKS = 14  # two per family: the gate runs every step, twice (candidate and current)
MEASURE_MAX_TOKENS = 8  # a right answer is at most 4 tokens and the end of turn
MIN_STEP_WAIT_S = 180.0
MAX_SENDS_PER_ROUND = 12  # grouped recipes: top-ups while the learner waits for a full batch
STARTUP_TIMEOUT_S = 600.0


def add_demo_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="watch Reef learn: held-out score before and after live training rounds",
        description=(
            "Start Reef on the embedded defaults, measure a held-out test set, run training rounds through the "
            "API (answers graded and reported), and measure again after every published release."
        ),
    )
    parser.add_argument("--recipe", choices=sorted(PROFILES), default="sft", help="learning recipe (default sft)")
    parser.add_argument(
        "--rounds", type=int, help="training rounds, one learner step each (default: the recipe's, 12 for sft)"
    )
    parser.add_argument(
        "--time-budget", type=float, default=600.0, help="seconds; no round starts that would end past it (600)"
    )
    parser.add_argument("--json", action="store_true", help="print only the result JSON on stdout")
    parser.add_argument("--report", type=Path, help="write a self-contained HTML report here")
    parser.add_argument("--port", type=int, help="port for the server (default: a free one)")
    parser.add_argument("--state-dir", type=Path, help="Reef's state directory (default: a temporary one)")
    parser.add_argument("--keep-state", action="store_true", help="keep the state directory afterwards")
    parser.add_argument("--learning-rate", type=float, help="override the recipe's training learning rate")
    parser.add_argument("--epochs", type=int, help="override the recipe's epochs per batch")
    parser.add_argument("--seed", type=int, default=0, help="task generation seed")
    parser.add_argument("--single-phase", action="store_true", help="sdft: one phase on every family instead of two")
    parser.add_argument("--compare", choices=["sft"], help="sdft: run the same stream with sft too")
    parser.add_argument(
        "--teacher-rounds", type=int, default=8, help="opd: sft rounds that train the teacher first (default 8)"
    )
    parser.set_defaults(handler=run_demo)


@dataclasses.dataclass
class DemoRun:
    """Everything the demo measured; `to_json` is what `--json` prints."""

    recipe: str
    metric: str = "exact"  # which held-out figure is the headline: `exact` or `partial`
    baseline: Measurement | None = None
    final: Measurement | None = None
    rounds: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    startup_s: float = 0.0
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # a recipe's own figures (opd: its teacher)

    def to_json(self) -> dict[str, Any]:
        baseline = self.baseline.score(self.metric) if self.baseline else None
        final = self.final.score(self.metric) if self.final else None
        result = {
            "recipe": self.recipe,
            "metric": self.metric,
            "baseline": baseline,
            "final": final,
            "improvement": round(final - baseline, 4) if baseline is not None and final is not None else None,
            "baseline_ci95": self.baseline.interval(self.metric) if self.baseline else None,
            "final_ci95": self.final.interval(self.metric) if self.final else None,
            "baseline_exact": self.baseline.exact if self.baseline else None,
            "final_exact": self.final.exact if self.final else None,
            "baseline_acceptance": self.baseline.acceptance if self.baseline else None,
            "final_acceptance": self.final.acceptance if self.final else None,
            "baseline_partial": self.baseline.partial if self.baseline else None,
            "final_partial": self.final.partial if self.final else None,
            "baseline_by_family": self.baseline.by_family if self.baseline else None,
            "final_by_family": self.final.by_family if self.final else None,
            "rounds": self.rounds,
            "published": sum(1 for r in self.rounds if r.get("verdict") == "published"),
            "wall_s": round(self.wall_s, 1),
            "startup_s": round(self.startup_s, 1),
            "settings": self.settings,
            "error": self.error,
            **self.extra,
        }
        if self.metric == "acceptance":  # openclawrl grades no answer against a known one: no exact / partial figures
            for key in ("baseline_exact", "final_exact", "baseline_partial", "final_partial"):
                del result[key]
        else:
            del result["baseline_acceptance"], result["final_acceptance"]
        return result


def run_demo(args: argparse.Namespace) -> int:
    if args.recipe == "openclawrl":  # sessions with a simulated user instead of graded reports
        from reef.cli.demo_openclawrl import run_openclawrl_demo

        return run_openclawrl_demo(args)
    started = time.monotonic()
    # Stopped from outside: unwind like Ctrl-C, so the server is stopped and the partial result still printed.
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    profile = PROFILES[args.recipe]
    args.rounds = args.rounds or profile.rounds
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-demo-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    validation = generate("validation", VALIDATION_TASKS, seed=args.seed)
    test = generate("test", TEST_TASKS, seed=args.seed)
    _write_jsonl(state_dir / "test.jsonl", [t.to_evaluation_row() for t in test])
    run = DemoRun(recipe=profile.recipe, metric=profile.grading)
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
        run.extra["teacher_reverse_kl"] = teacher_kl_figures(state_dir, test, MEASURE_MAX_TOKENS, console)
    if args.compare == "sft" and profile.recipe == "sdft" and code == 0:
        code = _compare(run, args, state_dir, validation, test, console)
    run.wall_s = time.monotonic() - started
    if not args.keep_state and args.state_dir is None:
        shutil.rmtree(state_dir, ignore_errors=True)
    finish(run, args, console)
    return code if run.error or run.final is not None else 1


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
    flags = profile.serve_flags(args.learning_rate, args.epochs)
    command = serve_command(profile.recipe, port, state_dir, tasks_path, profile.batch_size, flags)
    run.settings = {
        "rounds": args.rounds,
        "time_budget_s": args.time_budget,
        "prompts_per_round": profile.prompts_per_round,
        "samples_per_prompt": profile.samples_per_prompt,
        "temperature": profile.temperature,
        "max_tokens": profile.max_tokens,
        "learning_rate": args.learning_rate or profile.learning_rate,
        "epochs": args.epochs or profile.epochs,
        "test_tasks": len(test),
        "validation_tasks": len(validation),
        "serve_command": command[2:],
    }
    console.print(f"[bold]reef demo[/] · recipe {profile.recipe} · state {state_dir} · {url}")
    console.print(f"  {len(test)} held-out test tasks, {len(validation)} validation tasks for the learner's gate")
    server = ReefServer(command, url, state_dir / f"serve-{profile.recipe}.log")
    code = 0
    try:
        with server:
            console.print("  starting reef serve (SmolLM2, SQLite, git) …")
            run.startup_s = server.wait_healthy(STARTUP_TIMEOUT_S)
            if args.recipe == "sdft" and not args.single_phase:  # its --compare sft run too
                make_run = lambda: DemoRun(recipe=profile.recipe, metric=profile.grading)  # noqa: E731
                asyncio.run(two_phases(_rounds, make_run, run, profile, args, url, test, console, started))
            else:
                asyncio.run(_rounds(run, profile, args, url, test, console, started))
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
    """The same stream with `sft` (fresh state, same tasks); `retention` and `gains` side by side in `run.extra`."""
    console.print("[bold]--compare sft[/]: the same stream with sft, from the base")
    (state_dir / "compare-sft").mkdir(parents=True, exist_ok=True)
    other = DemoRun(recipe="sft", metric=run.metric)
    code = _serve(other, PROFILES["sft"], args, state_dir / "compare-sft", free_port(), validation, test, console,
                  time.monotonic())  # fmt: skip
    runs = {"sdft": run, "sft": other}
    phases = {name: r.extra.get("phases") or {} for name, r in runs.items()}
    run.extra["retention"] = {name: p.get("retention") for name, p in phases.items()}
    run.extra["retained_fraction"] = {name: p.get("retained_fraction") for name, p in phases.items()}
    run.extra["gains"] = {name: r.to_json()["improvement"] for name, r in runs.items()}
    run.extra["compare_sft"] = other.to_json()
    return code


async def _rounds(
    run: DemoRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    url: str,
    test: list[DemoTask],
    console: Console,
    started: float,
) -> None:
    api = ReefAPI(url, f"demo-{profile.recipe}")
    try:
        console.print("  measuring the base model on the held-out test set …")
        run.baseline = run.final = await api.measure(test, MEASURE_MAX_TOKENS)
        console.print(
            f"  [bold]baseline[/] held-out exact {run.baseline.exact:.2f}  partial {run.baseline.partial:.2f}"
        )
        training = training_rounds(profile.prompts_per_round, args.rounds, args.seed, getattr(args, "families", None))
        step = await api.last_step()
        round_s: list[float] = []
        for number in range(1, args.rounds + 1):
            elapsed = time.monotonic() - started
            expected = max(round_s[-3:], default=0.0)
            if elapsed + expected > args.time_budget:
                console.print(f"  time budget {args.time_budget:.0f} s reached after {number - 1} rounds")
                break
            round_started = time.monotonic()
            # A step may take long on a busy machine: wait for it while the budget lasts (and at least a while).
            wait_s = max(MIN_STEP_WAIT_S, args.time_budget - elapsed)
            entry = await _one_round(api, profile, number, training, step, test, wait_s)
            if entry["measured"] is not None:
                run.final = Measurement(**entry["measured"])
            step = max(step, int(entry.get("step") or step))
            round_s.append(time.monotonic() - round_started)
            entry["round_s"] = round(round_s[-1], 1)
            entry["elapsed_s"] = round(time.monotonic() - started, 1)
            entry["heldout_exact"] = run.final.exact
            entry["heldout_partial"] = run.final.partial
            run.rounds.append(entry)
            _print_round(console, entry, args.rounds, run)
            if entry["verdict"] == "timeout":
                console.print("  the learner did not finish the step within the time budget; stopping")
                break
    finally:
        await api.aclose()


async def _one_round(
    api: ReefAPI,
    profile: RecipeProfile,
    number: int,
    training: Iterator[list[DemoTask]],
    after_step: int,
    test: list[DemoTask],
    wait_s: float,
) -> dict[str, Any]:
    answers: list[Answer] = []
    sent = 0

    async def send(batch: list[DemoTask]) -> None:
        nonlocal sent
        sent += 1
        groups = [f"r{number}-{sent}-{i}" for i in range(len(batch))]
        jobs = [
            (task, group, k)
            for task, group in zip(batch, groups, strict=True)
            for k in range(profile.samples_per_prompt)
        ]
        got = await asyncio.gather(
            *(api.chat(task, profile.temperature, profile.max_tokens, {"purpose": "training"}) for task, _, _ in jobs)
        )
        await asyncio.gather(
            *(
                api.report(profile.score(answer), answer.receipt, profile.metadata(answer, group, k))
                for answer, (_, group, k) in zip(got, jobs, strict=True)
            )
        )
        answers.extend(got)

    async def nudge() -> None:
        # A grouped recipe drops groups whose answers all scored the same: send fresh prompts to fill the batch.
        if sent < MAX_SENDS_PER_ROUND:
            await send(next(training))

    await send(next(training))
    grouped = profile.samples_per_prompt > 1
    outcome = await api.wait_for_step(after_step, wait_s, nudge=nudge if grouped else None)
    commit = outcome.commit or {}
    measured: Measurement | None = None
    if outcome.verdict == "published":
        # Only a newly served release can change the held-out score; otherwise the last measurement stands.
        measured = await api.measure(test, MEASURE_MAX_TOKENS)
    scores = [profile.score(a) for a in answers]
    return {
        "round": number,
        "step": commit.get("step"),
        "verdict": outcome.verdict,
        "reason": commit.get("reason"),
        "release_id": commit.get("release_id"),
        "train_prompts": len(answers),
        "train_score": round(sum(scores) / len(scores), 4) if scores else None,
        "train_exact": round(sum(float(is_exact(a.task, a.text)) for a in answers) / max(len(answers), 1), 4),
        "gate_candidate": _rounded((commit.get("metrics") or {}).get("candidate_mean")),
        "gate_current": _rounded((commit.get("metrics") or {}).get("current_mean")),
        "loss": _last_loss(commit),
        # A harness step: its mutations and whether the proposer or the method's deterministic fallback made them.
        "source": (commit.get("metrics") or {}).get("source"),
        "mutations": _mutation_summary(commit),
        "wait_s": outcome.waited_s,
        "measured": measured.to_json() if measured else None,
    }


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _print_round(console: Console, entry: dict[str, Any], rounds: int, run: DemoRun) -> None:
    verdict = entry["verdict"]
    color = {"published": "green", "kept": "cyan", "rejected": "yellow"}.get(verdict, "red")
    assert run.baseline is not None
    score = entry[f"heldout_{run.metric}"]
    gain = score - run.baseline.score(run.metric)
    measured = "" if entry["measured"] else " (unchanged)"
    exact = "" if run.metric == "exact" else f" · exact {entry['heldout_exact']:.2f}"
    console.print(
        f"  round {entry['round']:>2}/{rounds} · step {entry['step']} [{color}]{verdict}[/] · "
        f"train score {entry['train_score'] or 0:.2f} · held-out {run.metric} [bold]{score:.2f}[/] ({gain:+.2f})"
        f"{measured}{exact} · {entry['round_s']:.0f} s (total {entry['elapsed_s']:.0f} s)"
    )


def finish(run: DemoRun, args: argparse.Namespace, console: Console) -> None:
    result = run.to_json()
    if args.report is not None:
        write_report(args.report, result)
        console.print(f"  report written to {args.report}")
    if run.baseline is not None and run.final is not None and run.metric == "acceptance":
        low, high = result["final_ci95"]
        console.print(
            f"[bold]held-out acceptance {result['baseline']:.2f} → {result['final']:.2f} ({result['improvement']:+.2f})"
            f"[/] (95% interval of the final {low:.2f}–{high:.2f}) in {run.wall_s:.0f} s, "
            f"{result['published']} of {len(run.rounds)} steps published"
        )
    elif run.baseline is not None and run.final is not None:
        console.print(
            f"[bold]held-out {run.metric} {result['baseline']:.2f} → {result['final']:.2f} "
            f"({result['improvement']:+.2f})[/] (95% interval of the final {result['final_ci95'][0]:.2f}–"
            f"{result['final_ci95'][1]:.2f}; exact {run.baseline.exact:.2f} → {run.final.exact:.2f}) "
            f"in {run.wall_s:.0f} s, "
            f"{result['published']} of {len(run.rounds)} steps published"
        )
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _rounded(value: Any) -> float | None:
    return round(float(value), 4) if isinstance(value, int | float) else None


def _mutation_summary(commit: dict[str, Any]) -> list[str] | None:
    mutations = (commit.get("metrics") or {}).get("mutations")
    if not isinstance(mutations, list):
        return None
    summary = []
    for mutation in mutations[:12]:
        node = mutation.get("node") or {}
        text = str((node.get("config") or {}).get("text", ""))[:80].replace("\n", " ")
        summary.append(f"{mutation.get('op')} {node.get('kind', '')} {mutation.get('id') or node.get('id')}: {text}")
    return summary


def _last_loss(commit: dict[str, Any]) -> float | None:
    losses = (commit.get("metrics") or {}).get("loss")
    if isinstance(losses, list) and losses:
        return _rounded(losses[-1])
    return _rounded(losses)
