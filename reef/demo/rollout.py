"""`reef demo --rollout canary`: both outcomes of a live rollout on the embedded model.

`reef serve` runs `sft` in rollout mode canary, at a large canary share, with a gate that accepts every
candidate (policy `always`): the gate is not what decides here, the users are. Two rollouts follow:

1. **a better release**: one step on demonstrations of the right answers opens a rollout; scripted users (each a
   `x-reef-tag-user`) ask held-out questions, grade the answer (1 if exactly right, else 0) and report the grade;
   the sequential test promotes the canary;
2. **a release the users dislike**: one step on a polite non-answer to the questions the users ask, which the
   gate still accepts, opens a second rollout; the same users' grades roll it back.

The users' reports are plain scores, as real users give them: `sft` stores each as rollout evidence and trains
on none (`skipped` as `no_demonstration`). The second step's batch is queued, without scores, while the learner is
paused during the first rollout: the only training is the two scripted steps. The demo prints, per rollout, its
decision, how many attributed reports it took, and which share of the users was ever served the canary.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from reef.demo.api import ReefAPI
from reef.demo.recipes import ONE_LESSON_FLAGS
from reef.demo.server import STARTUP_TIMEOUT_S, ReefServer, free_port, serve_command, unwind_on_sigterm
from reef.demo.tasks import DemoTask, generate, is_exact

SCENARIO = "demo-rollout"
FAMILIES = ("add", "number", "repeat")  # the families one sft step learns best
CANARY_SHARE = 0.5
TRAINING_PROMPTS = 24  # one learner batch
MAX_TOKENS = 8
USERS = 40  # the scripted users; each comes back with more questions, and keeps its arm
USERS_PER_WAVE = 8  # asked at once, so the engine batches them
MAX_QUESTIONS = 1200  # per rollout; a rollout still open then is reported undecided
ROLLOUT_WAIT_S = 240.0  # for a training step to open its rollout


class RolloutClient(Protocol):
    """What the user phase needs of the server (`DemoClient` over HTTP; tests pass a fake)."""

    async def ask(self, task: DemoTask, user: str) -> tuple[str, str, str | None]:
        """(answer, receipt, serving release) of `user` asking `task`."""

    async def report(self, score: float, receipt: str) -> str:
        """Report `score` on `receipt`, and nothing else."""

    async def rollout(self) -> dict[str, Any]:
        """The scenario's rollout (`GET /reef/scenarios/{s}/rollout`)."""


@dataclasses.dataclass
class RolloutOutcome:
    """One rollout as the demo saw it."""

    label: str
    rollout_id: str | None
    state: str
    decided_by: str | None
    reports: int
    users: int  # the users who asked during the rollout
    exposed_users: int  # of them, those ever served the canary
    wall_s: float
    arms: dict[str, Any] = dataclasses.field(default_factory=dict)  # each arm's reports, mean and interval at the end

    @property
    def exposed_share(self) -> float:
        return self.exposed_users / self.users if self.users else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "exposed_share": round(self.exposed_share, 4)}


async def users_until_decided(
    client: RolloutClient, label: str, questions: list[DemoTask], max_questions: int = MAX_QUESTIONS
) -> RolloutOutcome:
    """Scripted users ask and grade until the open rollout ends (or `max_questions` were asked); who saw the
    canary. The users take turns, so each asks several questions: sticky assignment keeps a user on one arm."""
    started = time.monotonic()
    view = await client.rollout()
    candidate = view["candidate_release_id"]
    exposed: set[str] = set()
    seen: set[str] = set()
    asked = 0
    cycle = itertools.cycle(questions)
    while view["state"] == "canary" and asked < max_questions:
        wave = [(f"user-{(asked + i) % USERS}", next(cycle)) for i in range(USERS_PER_WAVE)]
        seen.update(user for user, _ in wave)
        answers = await asyncio.gather(*(client.ask(task, user) for user, task in wave))
        for (user, task), (text, receipt, served_by) in zip(wave, answers, strict=True):
            if served_by == candidate:
                exposed.add(user)
            await client.report(float(is_exact(task, text)), receipt)
        asked += len(wave)
        view = await _settled(client, view)
    reports = sum(int(arm["reports"]) for arm in view["arms"].values())
    return RolloutOutcome(
        label, view["rollout_id"], view["state"], view.get("decided_by"), reports, len(seen), len(exposed),
        round(time.monotonic() - started, 1), view["arms"],
    )  # fmt: skip


async def _settled(client: RolloutClient, view: dict[str, Any], polls: int = 10, poll_s: float = 0.3) -> dict[str, Any]:
    """The rollout once the server has counted the reports just sent (its check runs every half second)."""
    sent = view
    for _ in range(polls):
        await asyncio.sleep(poll_s)
        view = await client.rollout()
        if view["state"] != "canary" or view != sent:
            return view
    return view


class DemoClient:
    """`RolloutClient` over HTTP, plus the training phase's calls."""

    def __init__(self, url: str) -> None:
        self.api = ReefAPI(url, SCENARIO)

    async def ask(self, task: DemoTask, user: str) -> tuple[str, str, str | None]:
        return await self.api.complete(task.messages(), 0.0, MAX_TOKENS, {"user": user})

    async def report(self, score: float, receipt: str) -> str:
        return await self.api.report(score, receipt, {})

    async def rollout(self) -> dict[str, Any]:
        return await self.api.rollout()

    async def create(self) -> None:
        await self.api.create()

    async def pause(self, paused: bool) -> None:
        await self.api.update({"paused": paused})

    async def queue_demonstrations(self, tasks: list[DemoTask], answers: list[str]) -> None:
        """Ask each prompt once and report `answers` as its demonstrations, without a score (so no open rollout
        counts them): one learner batch, which trains when the learner next runs."""
        replies = await asyncio.gather(*(self.api.complete(t.messages(), 0.0, MAX_TOKENS) for t in tasks))
        for (_, receipt, _), answer in zip(replies, answers, strict=True):
            await self.api.report(None, receipt, {"demonstration": answer})

    async def wait_for_rollout(self, after: str | None, timeout_s: float) -> dict[str, Any]:
        """The rollout a training step opened (one other than `after`), polled until `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            view = await self.rollout()
            if view["state"] == "canary" and view["rollout_id"] != after:
                return view
            await asyncio.sleep(1.0)
        raise TimeoutError(f"no rollout opened within {timeout_s:g} s")


HEDGE = "Sorry, I am not sure."


def wrong_answers(tasks: list[DemoTask]) -> list[str]:
    """For each task, the same polite non-answer (`HEDGE`): wrong under the users' exact grading, and one pattern,
    which a single step teaches far more surely than as many different wrong answers as there are questions."""
    return [HEDGE for _ in tasks]


async def two_rollouts(url: str, console: Console, seed: int) -> list[RolloutOutcome]:
    """Train a better release and let the users promote it; then a worse one, and let them roll it back."""
    client = DemoClient(url)
    training = generate("train", TRAINING_PROMPTS, seed=seed, families=FAMILIES)
    questions = generate("test", TRAINING_PROMPTS, seed=seed, families=FAMILIES)  # held out from the better step
    outcomes = []
    try:
        await client.create()
        await client.pause(False)
        console.print("  training a better release (demonstrations of the right answers) …")
        await client.queue_demonstrations(training, [t.answer for t in training])
        view = await client.wait_for_rollout(None, ROLLOUT_WAIT_S)
        await client.pause(True)
        # The disliked release's batch is queued now, while the learner is paused, so that it is the next batch (the
        # users' plain scores train nothing either way).
        await client.queue_demonstrations(questions, wrong_answers(questions))
        for label in ("better", "worse"):
            if label == "worse":
                console.print(f"  training a worse release (demonstrations of {HEDGE!r} to the users' questions) …")
                await client.pause(False)
                view = await client.wait_for_rollout(view["rollout_id"], ROLLOUT_WAIT_S)
                await client.pause(True)
            canary = view["candidate_release_id"][:12]
            console.print(f"  {label} release {canary}: rollout {view['rollout_id']} serves it to {view['share']:.0%}")
            outcome = await users_until_decided(client, label, questions)
            outcomes.append(outcome)
            console.print(
                f"  [bold]{outcome.state}[/] ({outcome.decided_by or 'undecided'}) after {outcome.reports} reports; "
                f"{outcome.exposed_users} of {outcome.users} users ({outcome.exposed_share:.0%}) were served the canary"
            )
    finally:
        await client.api.aclose()
    return outcomes


def run_rollout_demo(args: argparse.Namespace) -> int:
    """`reef demo --rollout canary`: start `reef serve`, run both rollouts, print (or `--json`) the outcomes."""
    started = time.monotonic()
    unwind_on_sigterm()
    console = Console(stderr=args.json, highlight=False, soft_wrap=True)
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="reef-demo-rollout-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    tasks_path = state_dir / "validation.jsonl"
    validation = generate("validation", 6, seed=args.seed, families=FAMILIES)
    tasks_path.write_text("".join(json.dumps(t.to_evaluation_row()) + "\n" for t in validation))
    command = serve_command("sft", port, state_dir, tasks_path, TRAINING_PROMPTS, serve_flags(args))
    result: dict[str, Any] = {"recipe": "sft", "rollout": "canary", "serve_command": command[2:], "error": None}
    code = 0
    console.print(f"[bold]reef demo --rollout canary[/] · state {state_dir} · {url}")
    server = ReefServer(command, url, state_dir / "serve.log")
    try:
        with server:
            console.print("  starting reef serve (SmolLM2, SQLite, git) …")
            server.wait_healthy(STARTUP_TIMEOUT_S)
            outcomes = asyncio.run(two_rollouts(url, console, args.seed))
            result["rollouts"] = [o.to_json() for o in outcomes]
            code = summarize(outcomes, console)
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        code = 130
    except Exception as exc:  # say what failed and how the server ended, then fail
        result["error"] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]reef demo: {result['error']}[/]\n{server.log_tail(15)}")
        code = 1
    result["wall_s"] = round(time.monotonic() - started, 1)
    if not args.keep_state and args.state_dir is None:
        shutil.rmtree(state_dir, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    return code


EXPECTED = {"better": "promoted", "worse": "rolled_back"}


def summarize(outcomes: list[RolloutOutcome], console: Console) -> int:
    """Print what each rollout took; 0 when the better release was promoted and the worse one rolled back."""
    for outcome in outcomes:
        console.print(
            f"  {outcome.label} release: {outcome.state} after {outcome.reports} reports, "
            f"{outcome.exposed_share:.0%} of the users ever served it ({outcome.wall_s:g} s)"
        )
    missed = [o.label for o in outcomes if EXPECTED.get(o.label) != o.state]
    if missed or len(outcomes) != len(EXPECTED):
        console.print(f"[red]reef demo: the users did not decide as expected for: {', '.join(missed) or 'all'}[/]")
        return 1
    return 0


def serve_flags(args: argparse.Namespace) -> list[str]:
    """The `reef serve` flags of the rollout demo (then `--serve-flags`, which win)."""
    return [
        "--rollout.mode", "canary",
        "--rollout.canary-share", str(CANARY_SHARE),
        "--rollout.check-interval-s", "0.5",
        "--evaluation.policy", "always",
        "--evaluation.max-new-tokens", str(MAX_TOKENS),
        "--training.learning-rate", repr(args.learning_rate or 6e-4),
        "--training.epochs", str(args.epochs or 2),
        *ONE_LESSON_FLAGS,
        *args.serve_flags,
    ]  # fmt: skip
