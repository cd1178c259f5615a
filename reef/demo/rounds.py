"""The training rounds of `reef demo`: each sends prompts, reports their grades, waits for the learner's step and
measures the held-out set again when a new release serves.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from reef.demo.api import Answer, Measurement, ReefAPI
from reef.demo.controls import memory_control_messages, prompt_control_messages
from reef.demo.recipes import HARNESS_METHODS, RecipeProfile
from reef.demo.result import DemoRun, outside_budget
from reef.demo.suites import suite_named
from reef.demo.tasks import DemoTask, is_exact

MEASURE_MAX_TOKENS = 8  # a right answer is at most 4 tokens and the end of turn
MIN_STEP_WAIT_S = 180.0
MAX_SENDS_PER_ROUND = 12  # grouped recipes: top-ups while the learner waits for a full batch


async def run_rounds(
    run: DemoRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    url: str,
    test: list[DemoTask],
    console: Console,
    started: float,
) -> None:
    """Measure the base model, then run `args.rounds` rounds while the time budget lasts, filling `run`.

    The budget covers the training rounds: the time the prompt control takes is added to it (it is recorded as
    `settings["control_s"]`), so a long control never costs the method its rounds."""
    api = ReefAPI(url, f"demo-{profile.recipe}")
    try:
        console.print("  measuring the base model on the held-out test set …")
        run.baseline = run.final = await api.measure(test, MEASURE_MAX_TOKENS)
        console.print(
            f"  [bold]baseline[/] held-out exact {run.baseline.exact:.2f}  partial {run.baseline.partial:.2f}"
        )
        suite = suite_named(getattr(args, "suite", "skills"), getattr(args, "feedback", "recipe"))
        budget_from = started
        if getattr(args, "controls", False) and profile.recipe not in HARNESS_METHODS:
            control_started = time.monotonic()
            await measure_prompt_control(api, run, suite, args.seed, test, console)
            budget_from += outside_budget(run, time.monotonic() - control_started)
        training = suite.training_rounds(
            profile.prompts_per_round, args.rounds, args.seed, getattr(args, "families", None)
        )
        step = await api.last_step()
        round_s: list[float] = []
        scored_right: list[Answer] = []  # what the memory control keeps: the answers users scored 1
        for number in range(1, args.rounds + 1):
            elapsed = time.monotonic() - budget_from
            expected = max(round_s[-3:], default=0.0)
            if elapsed + expected > args.time_budget:
                console.print(f"  time budget {args.time_budget:.0f} s reached after {number - 1} rounds")
                break
            round_started = time.monotonic()
            # A step may take long on a busy machine: wait for it while the budget lasts (and at least a while).
            wait_s = max(MIN_STEP_WAIT_S, args.time_budget - elapsed)
            # `--sample-from lineage`: the round's prompts are answered by the weights the next step trains from.
            pin = await api.lineage_tip() if args.sample_from == "lineage" else None
            entry = await one_round(api, profile, number, training, step, test, wait_s, pin, scored_right)
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
            if entry["verdict"] == "starved":
                console.print(
                    f"  {MAX_SENDS_PER_ROUND} sends did not fill the learner's batch (every group's answers scored "
                    "alike: `skipped` in /reef/status says why); stopping"
                )
                break
        if getattr(args, "controls", False) and profile.feedback == "score" and test and test[0].context:
            await measure_memory_control(api, run, test, scored_right, console)
    finally:
        await api.aclose()


async def measure_prompt_control(
    api: ReefAPI, run: DemoRun, suite: Any, seed: int, test: list[DemoTask], console: Console
) -> None:
    """`controls.prompt`: the base model (it serves before the first step) with the suite's instruction and as many
    solved training examples as its context holds, on the same held-out tasks."""
    prefix = prompt_control_messages(suite, seed)
    examples = (len(prefix) - 1) // 2
    console.print(f"  measuring the prompt control (instruction + {examples} solved examples) …")
    run.controls["prompt"] = measured = await api.measure(test, MEASURE_MAX_TOKENS, prefix)
    run.settings["prompt_control_examples"] = examples
    console.print(f"  [bold]prompt control[/] held-out {run.metric} {measured.score(run.metric):.2f}")


async def measure_memory_control(
    api: ReefAPI, run: DemoRun, test: list[DemoTask], scored_right: list[Answer], console: Console
) -> None:
    """`controls.memory`: the base model given the same scores as the method, kept as memory instead of weights:
    the deployment's own answer form, then every distinct training question whose sampled answer was scored 1,
    with that answer, as earlier turns (as many as the context holds), on the same held-out tasks, answered by
    the release the baseline was measured on (the base model), whatever serves now."""
    prefix = memory_control_messages(test[0].context, scored_right)
    examples = (len(prefix) - 1) // 2
    console.print(f"  measuring the memory control ({examples} answers users scored 1, as worked examples) …")
    base = run.baseline.release_id if run.baseline else None
    run.controls["memory"] = measured = await api.measure(test, MEASURE_MAX_TOKENS, prefix, base)
    run.settings["memory_control_examples"] = examples
    console.print(f"  [bold]memory control[/] held-out {run.metric} {measured.score(run.metric):.2f}")


async def one_round(
    api: ReefAPI,
    profile: RecipeProfile,
    number: int,
    training: Iterator[list[DemoTask]],
    after_step: int,
    test: list[DemoTask],
    wait_s: float,
    pin: str | None = None,
    scored_right: list[Answer] | None = None,
) -> dict[str, Any]:
    """Send one round's prompts and report their grades, wait for the step after `after_step`; its entry.

    `pin`: the release that answers the round's prompts (None: the serving one); `scored_right` collects the
    answers scored 1."""
    answers: list[Answer] = []
    answer_scores: list[float] = []  # what each of `answers` was reported as
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
            *(
                api.chat(task, profile.temperature, profile.max_tokens, {"purpose": "training"}, pin)
                for task, _, _ in jobs
            )
        )
        scores = [profile.score(answer) for answer in got]
        await asyncio.gather(
            *(
                api.report(score, answer.receipt, profile.metadata(answer, group, k))
                for answer, score, (_, group, k) in zip(got, scores, jobs, strict=True)
            )
        )
        answers.extend(got)
        answer_scores.extend(scores)
        if scored_right is not None:
            scored_right.extend(answer for answer, score in zip(got, scores, strict=True) if score == 1.0)

    async def nudge() -> bool:
        # A grouped recipe drops groups whose answers all scored the same: send fresh prompts to fill the batch.
        if sent >= MAX_SENDS_PER_ROUND:
            return False
        await send(next(training))
        return True

    await send(next(training))
    grouped = profile.samples_per_prompt > 1
    outcome = await api.wait_for_step(after_step, wait_s, nudge=nudge if grouped else None)
    commit = outcome.commit or {}
    measured: Measurement | None = None
    if outcome.verdict == "published":
        # Only a newly served release can change the held-out score; otherwise the last measurement stands.
        measured = await api.measure(test, MEASURE_MAX_TOKENS)
    metrics = commit.get("metrics") or {}
    return {
        "round": number,
        "step": commit.get("step"),
        "verdict": outcome.verdict,
        "reason": commit.get("reason"),
        "release_id": commit.get("release_id"),
        "sampled_from": pin,
        "train_prompts": len(answers),
        "train_score": round(sum(answer_scores) / len(answer_scores), 4) if answer_scores else None,
        "train_exact": round(sum(float(is_exact(a.task, a.text)) for a in answers) / max(len(answers), 1), 4),
        "gate_candidate": _rounded(metrics.get("candidate_mean")),
        "gate_current": _rounded(metrics.get("current_mean")),
        "loss": _last_loss(commit),
        # A harness step: its mutations and whether the proposer or the method's deterministic fallback made them.
        "source": metrics.get("source"),
        "mutations": _mutation_summary(commit),
        # The retention guard's figures (earlier lessons' items) and the earlier samples the step replayed.
        "retention": metrics.get("retention"),
        "rehearsal_samples": metrics.get("rehearsal_samples"),
        "wait_s": outcome.waited_s,
        "measured": measured.to_json() if measured else None,
    }


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
