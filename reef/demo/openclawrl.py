"""`reef demo --recipe openclawrl`: learning from usage alone. Nobody reports anything.

A simulated user (`demo_user`: scripted, labelled as such) holds sessions with the served model through the API:
it asks a question, complains when the answer is longer than it wants, else thanks and asks the next one. Reef
rebuilds the sessions from the `x-reef-tag-session` header, a rule-based judge (`demo_user.judge`, labelled as
such) reads each turn's next state, and the learner trains on the judged turns. Before any training and after
every published release, a held-out set of questions is asked afresh (greedy, one per new session): the figure
is the share of answers the user accepts, with its 95% Wilson interval.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from reef.demo.api import Measurement, ReefAPI, wilson_interval
from reef.demo.recipes import RecipeProfile, demo_profile
from reef.demo.result import DemoRun, finish, outside_budget
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, ServerFailed, free_port, serve_command, unwind_on_sigterm
from reef.demo.user import HINT, MAX_WORDS, Question, accepts, questions, reply

SCENARIO = "demo-openclawrl"
MEASURE_MAX_TOKENS = 32  # enough for an answer to run past MAX_WORDS words
MIN_STEP_WAIT_S = 180.0
EXAMPLES = 8
# The prompt control: the base model told, in its instruction, what the simulated user and the judge want.
PREFERENCE_INSTRUCTION = f"The user wants short answers. {HINT}"


def run_openclawrl_demo(args: argparse.Namespace) -> int:
    unwind_on_sigterm()
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    code, run = openclawrl_run(args, console)
    finish(run, args, console)
    return code


def openclawrl_run(args: argparse.Namespace, console: Console) -> tuple[int, DemoRun]:
    """One whole openclawrl demo at `args.seed`: (exit code, what it measured)."""
    started = time.monotonic()
    load_start = round(os.getloadavg()[0], 2)
    profile = demo_profile("openclawrl", args.recipe_config)
    args.rounds = args.rounds or profile.rounds
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-demo-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    bank = questions(args.seed)
    run = DemoRun(recipe="openclawrl", metric="acceptance", suite="sessions")
    tasks_path = state_dir / "validation-openclawrl.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": q.text}], "checker": "reef.demo.user:gate_acceptance"}
        for q in bank["validation"]
    ]
    tasks_path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    # The gate must see answers long enough to run past the word limit.
    flags = [*profile.serve_flags(args.learning_rate, args.epochs), "--evaluation.max-new-tokens", "32"]
    flags += args.serve_flags
    command = serve_command("openclawrl", port, state_dir, tasks_path, profile.batch_size, flags)
    run.settings = {
        "rounds": args.rounds,
        "time_budget_s": args.time_budget,
        "sessions_per_round": profile.prompts_per_round,
        "judged_turns_per_session": profile.samples_per_prompt,
        "temperature": profile.temperature,
        "max_tokens": profile.max_tokens,
        "max_words": MAX_WORDS,
        "learning_rate": args.learning_rate or profile.learning_rate,
        "epochs": args.epochs or profile.epochs,
        "recipe_config": profile.recipe_config,
        "test_questions": len(bank["test"]),
        "validation_questions": len(bank["validation"]),
        "training_questions": len(bank["training"]),
        "user": "simulated (scripted, reef.demo.user)",
        "judge": "rule-based (reef.demo.user:judge), reads the user's reply",
        "serve_command": command[2:],
    }
    console.print(f"[bold]reef demo[/] · recipe openclawrl · state {state_dir} · {url}")
    console.print(
        f"  a [bold]simulated user[/] (scripted) wants answers of at most {MAX_WORDS} words and complains otherwise;"
        " a [bold]rule-based judge[/] reads its replies. No reports are sent."
    )
    server = ReefServer(command, url, state_dir / "serve-openclawrl.log")
    code = 0
    try:
        with server:
            console.print("  starting reef serve (SmolLM2, SQLite, git) …")
            run.startup_s = server.wait_healthy(STARTUP_TIMEOUT_S)
            asyncio.run(_rounds(run, profile, args, url, bank, console, started))
    except ServerFailed as exc:
        run.error, code = str(exc), 1
        console.print(f"[red]reef demo: {exc}[/]")
    except KeyboardInterrupt:
        run.error, code = "interrupted", 130
    except Exception as exc:  # report what was measured so far, then fail
        run.error, code = f"{type(exc).__name__}: {exc}", 1
        console.print(f"[red]reef demo failed: {run.error}[/]\n{server.log_tail(15)}")
    run.wall_s = time.monotonic() - started
    # The machine may be shared: the load it ran under is part of the figure.
    run.extra["load_average_1m"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    if not args.keep_state and args.state_dir is None:
        shutil.rmtree(state_dir, ignore_errors=True)
    return (code if run.error or run.final is not None else 1), run


async def _rounds(
    run: DemoRun,
    profile: RecipeProfile,
    args: argparse.Namespace,
    url: str,
    bank: dict[str, list[Question]],
    console: Console,
    started: float,
) -> None:
    api = ReefAPI(url, SCENARIO)
    try:
        console.print(f"  measuring the base model on {len(bank['test'])} held-out questions …")
        run.baseline = run.final = await measure(api, bank["test"], "base", run.extra)
        console.print(f"  [bold]baseline[/] held-out acceptance {run.baseline.acceptance:.2f}")
        budget_from = started
        if getattr(args, "controls", False):
            control_started = time.monotonic()
            prefix = [{"role": "system", "content": PREFERENCE_INSTRUCTION}]
            run.controls["prompt"] = control = await measure(api, bank["test"], "control", run.extra, prefix)
            budget_from += outside_budget(run, time.monotonic() - control_started)
            console.print(f"  [bold]prompt control[/] (told the preference) acceptance {control.acceptance:.2f}")
        training = itertools.cycle(bank["training"])
        step = await api.last_step()
        round_s: list[float] = []
        for number in range(1, args.rounds + 1):
            elapsed = time.monotonic() - budget_from
            if elapsed + max(round_s[-3:], default=0.0) > args.time_budget:
                console.print(f"  time budget {args.time_budget:.0f} s reached after {number - 1} rounds")
                break
            round_started = time.monotonic()
            asked = [
                [next(training) for _ in range(profile.samples_per_prompt)] for _ in range(profile.prompts_per_round)
            ]
            sessions = (session(api, chosen, profile, f"r{number}-s{i}") for i, chosen in enumerate(asked))
            judged = [ok for each in await asyncio.gather(*sessions) for ok in each]
            outcome = await api.wait_for_step(step, max(MIN_STEP_WAIT_S, args.time_budget - elapsed))
            commit = outcome.commit or {}
            if outcome.verdict == "published":
                run.final = await measure(api, bank["test"], f"r{number}", run.extra)
            step = max(step, int(commit.get("step") or step))
            round_s.append(time.monotonic() - round_started)
            assert run.final is not None and run.baseline is not None
            metrics = commit.get("metrics") or {}
            entry = {
                "round": number,
                "step": commit.get("step"),
                "verdict": outcome.verdict,
                "reason": commit.get("reason"),
                "release_id": commit.get("release_id"),
                "train_prompts": len(judged),
                "train_score": round(sum(judged) / len(judged), 4),  # the share of training answers accepted
                "gate_candidate": metrics.get("candidate_mean"),
                "gate_current": metrics.get("current_mean"),
                "loss": _last(metrics.get("loss")),
                "loss_rl": _last(metrics.get("loss_rl")),
                "loss_opd": _last(metrics.get("loss_opd")),
                "wait_s": outcome.waited_s,
                "round_s": round(round_s[-1], 1),
                "elapsed_s": round(time.monotonic() - started, 1),
                "heldout_acceptance": run.final.acceptance,
            }
            run.rounds.append(entry)
            gain = (run.final.acceptance or 0.0) - (run.baseline.acceptance or 0.0)
            console.print(
                f"  round {number:>2}/{args.rounds} · step {entry['step']} {entry['verdict']} · training answers "
                f"accepted {entry['train_score']:.2f} · held-out acceptance [bold]{run.final.acceptance:.2f}[/] "
                f"({gain:+.2f}) · {entry['round_s']:.0f} s (total {entry['elapsed_s']:.0f} s)"
            )
            if outcome.verdict == "timeout":
                console.print("  the learner did not finish the step within the time budget; stopping")
                break
        run.extra.update(await judged_figures(api))
    finally:
        await api.aclose()


async def session(api: ReefAPI, asked: list[Question], profile: RecipeProfile, tag: str) -> list[bool]:
    """One simulated-user session: one answer per question, each judged by the user's reply (a complaint, or thanks
    and the next question); whether the user accepted each."""
    tags = {"session": tag, "purpose": "training"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": asked[0].text}]
    verdicts = []
    for next_question in [q.text for q in asked[1:]] + [None]:
        answer, _, _ = await api.complete(messages, profile.temperature, profile.max_tokens, tags)
        verdicts.append(accepts(answer))
        said = reply(answer, next_question)
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": said}]
    # The user's last message is sent too, so that the last answer has a next state; its own answer is not needed.
    await api.complete(messages, 0.0, 1, tags)
    return verdicts


async def measure(
    api: ReefAPI,
    test: list[Question],
    label: str,
    extra: dict[str, Any],
    prefix: list[dict[str, str]] | None = None,
) -> Measurement:
    """The share of held-out questions whose greedy answer the simulated user accepts, each asked in a new session
    (after `prefix`: the prompt control's instruction).

    The first `EXAMPLES` answers go to `extra["examples"]` (`baseline`, `prompt_control`, then `final`), so a
    reader can see what was accepted, not only how often."""
    started = time.monotonic()
    answers = await asyncio.gather(
        *(
            api.complete(
                [*(prefix or []), {"role": "user", "content": q.text}],
                0.0,
                MEASURE_MAX_TOKENS,
                {"session": f"heldout-{label}-{i}", "purpose": "heldout"},
            )  # fmt: skip
            for i, q in enumerate(test)
        )
    )
    accepted = [float(accepts(text)) for text, _, _ in answers]
    shown = [{"question": q.text, "answer": text} for q, (text, _, _) in zip(test[:EXAMPLES], answers, strict=False)]
    extra.setdefault("examples", {})[{"base": "baseline", "control": "prompt_control"}.get(label, "final")] = shown
    families: dict[str, list[float]] = {}
    for question, ok in zip(test, accepted, strict=True):
        families.setdefault(question.family, []).append(ok)
    releases = {release for _, _, release in answers}
    rate = round(sum(accepted) / len(accepted), 4)
    return Measurement(  # `exact` and `partial` stand for nothing here; `DemoRun.to_json` leaves them out
        exact=rate,
        partial=rate,
        by_family={name: round(sum(v) / len(v), 4) for name, v in sorted(families.items())},
        release_id=releases.pop() if len(releases) == 1 else None,
        wall_s=round(time.monotonic() - started, 2),
        acceptance=rate,
        acceptance_ci95=wilson_interval(sum(accepted), len(accepted)),
    )


async def judged_figures(api: ReefAPI) -> dict[str, Any]:
    """What the judge decided over the run, read back from the verdict records (`GET …/records`)."""
    rewards: list[float] = []
    after: int | None = 0
    while after is not None:
        rows, after = await api.records(after)
        rewards += [float(r["score"]) for r in rows if str(r.get("agent_record_id", "")).startswith("judge-")]
    status = await api.status()
    return {
        "turns_judged": len(rewards),
        "judged_minus_one_share": round(sum(r < 0 for r in rewards) / len(rewards), 4) if rewards else None,
        "judged_plus_one_share": round(sum(r > 0 for r in rewards) / len(rewards), 4) if rewards else None,
        "judge_status": status.get("computed_feedback"),
    }


def _last(values: Any) -> float | None:
    if isinstance(values, list) and values:
        values = values[-1]
    return round(float(values), 4) if isinstance(values, int | float) else None
