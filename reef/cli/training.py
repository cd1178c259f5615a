"""`reef train` and `reef training`: ask a running server for a learner step now, and set how a scenario trains.

Both go through the same HTTP routes as the console (`POST /reef/train`, `POST /reef/scenarios/{s}/update`,
`GET /reef/scenarios/{s}/contract`), with `--url` and `--token` (env REEF_URL, REEF_TOKEN).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console

from reef.cli.server_call import CommandError, call
from reef.cli.status import add_server_flags
from reef.learning.control import TRAINING_MODES

_POLL_S = 1.0


def add_training_commands(subparsers: Any) -> None:
    """Register `train` and `training` on the `reef` argument parser."""
    train = subparsers.add_parser(
        "train", help="queue a learner step now (training_mode manual or hybrid), optionally with an instruction"
    )
    train.add_argument("scenario")
    train.add_argument("text", nargs="?", help="an instruction handed to the recipe (harness proposers use it)")
    train.add_argument("--release-id", help="train from this release instead of the serving one")
    train.add_argument("--wait", action="store_true", help="wait for the step's commit and print its verdict")
    train.add_argument("--timeout-s", type=float, default=3600.0, help="how long --wait waits (default 3600)")
    train.add_argument("--json", action="store_true", help="print the raw JSON")
    add_server_flags(train)
    train.set_defaults(handler=run_train)

    training = subparsers.add_parser(
        "training",
        help="show how a scenario trains (its contract); --mode / --pause / --resume / --rollout change it",
    )
    training.add_argument("scenario")
    training.add_argument("--mode", choices=TRAINING_MODES, help="auto: full batches; manual: on request; hybrid: both")
    paused = training.add_mutually_exclusive_group()
    paused.add_argument("--pause", dest="paused", action="store_const", const=True, help="start no step until resumed")
    paused.add_argument("--resume", dest="paused", action="store_const", const=False, help="resume learning")
    training.add_argument(
        "--rollout",
        choices=("immediate", "canary"),
        help="immediate: an accepted release serves at once; canary: it earns its traffic in a rollout",
    )
    training.add_argument("--json", action="store_true", help="print the raw JSON")
    add_server_flags(training)
    training.set_defaults(handler=run_training)


def run_train(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.text:
        body["text"] = args.text
    if args.release_id:
        body["release_id"] = args.release_id
    try:
        after_step = _last_step(args)
        queued = call(args, "POST", "/reef/train", body, headers={"x-reef-scenario": args.scenario})
        commit = _wait_for_commit(args, queued["step_id"], after_step) if args.wait else None
    except CommandError as error:
        print(f"reef: {error}")
        return 1
    if args.json:
        print(json.dumps({"requested": queued, "commit": commit} if args.wait else queued, indent=2))
        return 0
    console = Console()
    console.print(f"step [bold]{queued['step_id']}[/] queued for scenario [bold]{args.scenario}[/]")
    if commit is not None:
        release = commit.get("release_id") or "-"
        reason = f" ({commit['reason']})" if commit.get("reason") else ""
        console.print(f"step {commit['step']}: [bold]{commit['verdict']}[/]{reason}, release {str(release)[:12]}")
    return 0


def run_training(args: argparse.Namespace) -> int:
    try:
        if args.mode is not None or args.paused is not None or args.rollout is not None:
            update: dict[str, Any] = {}
            if args.rollout is not None:
                update["rollout_mode"] = args.rollout
            if args.mode is not None:
                update["training_mode"] = args.mode
            if args.paused is not None:
                update["paused"] = args.paused
            call(args, "POST", f"/reef/scenarios/{args.scenario}/update", update)
        contract = call(args, "GET", f"/reef/scenarios/{args.scenario}/contract")
    except CommandError as error:
        print(f"reef: {error}")
        return 1
    if args.json:
        print(json.dumps(contract, indent=2))
        return 0
    if not contract.get("learns"):
        print(f"scenario {args.scenario}: recipe {contract.get('recipe')} does not learn")
        return 0
    requested = contract.get("requested")
    gate = contract.get("gate") or {}
    waiting = f": {gate['waiting']}" if gate.get("waiting") else ""
    lines = [
        f"scenario {args.scenario}: recipe {contract.get('recipe')} ({contract.get('surface')})",
        f"training_mode {contract.get('training_mode')}{', paused' if contract.get('paused') else ''}",
        f"ready {contract.get('ready')} of a batch of {contract.get('batch_size')}",
        f"gate {gate.get('source')} ({gate.get('tasks')} tasks){waiting}",
        f"requested step {requested['step_id']} ({requested['state']})" if requested else "no step requested",
        f"reports: {(contract.get('report_schema') or {}).get('description') or 'any well-formed report'}",
    ]
    Console().print("\n".join(lines), highlight=False)
    return 0


def _last_step(args: argparse.Namespace) -> int:
    status = call(args, "GET", "/reef/status")
    return int(((status.get("scenarios") or {}).get(args.scenario) or {}).get("step") or -1)


def _wait_for_commit(args: argparse.Namespace, step_id: str, after_step: int) -> dict[str, Any]:
    """The commit that answers request `step_id` (steps after `after_step`), polled until `args.timeout_s`."""
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        commits = call(args, "GET", f"/reef/scenarios/{args.scenario}/commits?after_step={after_step}&limit=1000")
        for commit in commits.get("commits") or []:
            if ((commit.get("metrics") or {}).get("request") or {}).get("step_id") == step_id:
                _wait_until_forgotten(args, step_id, deadline)
                return dict(commit)
            after_step = max(after_step, int(commit["step"]))
        time.sleep(_POLL_S)
    raise CommandError(f"step {step_id} did not commit within {args.timeout_s:g} s (it may still be running)")


def _wait_until_forgotten(args: argparse.Namespace, step_id: str, deadline: float) -> None:
    """The learner forgets a request just after its commit: wait for that, so a next `reef train` is not a 409."""
    while time.monotonic() < deadline:
        requested = call(args, "GET", f"/reef/scenarios/{args.scenario}/contract").get("requested")
        if not requested or requested.get("step_id") != step_id:
            return
        time.sleep(0.1)
