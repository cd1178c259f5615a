"""`reef rollout SCENARIO [promote|rollback]`: show a scenario's open or last rollout, or end the open one now.

Goes through `GET`/`POST /reef/scenarios/{s}/rollout` with `--url` and `--token` (env REEF_URL, REEF_TOKEN).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from reef.cli.server_call import CommandError, call
from reef.cli.status import add_server_flags


def add_rollout_command(subparsers: Any) -> None:
    """Register `rollout` on the `reef` argument parser."""
    rollout = subparsers.add_parser(
        "rollout",
        help="show a scenario's rollout (both arms' live scores and the decision); promote / rollback ends it now",
    )
    rollout.add_argument("scenario")
    rollout.add_argument(
        "action",
        nargs="?",
        choices=("promote", "rollback"),
        help="promote: the canary serves everything; rollback: the incumbent serves everything",
    )
    rollout.add_argument("--json", action="store_true", help="print the raw JSON")
    add_server_flags(rollout)
    rollout.set_defaults(handler=run_rollout)


def run_rollout(args: argparse.Namespace) -> int:
    path = f"/reef/scenarios/{args.scenario}/rollout"
    try:
        view = call(args, "POST", path, {"action": args.action}) if args.action else call(args, "GET", path)
    except CommandError as error:
        print(f"reef: {error}")
        return 1
    if args.json:
        print(json.dumps(view, indent=2))
        return 0
    Console().print("\n".join(describe(args.scenario, view)), highlight=False)
    return 0


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def describe(scenario: str, view: dict[str, Any]) -> list[str]:
    """The rollout in a few lines: state, arms (requests, errors, reports, mean and interval), decision."""
    if view["state"] == "none":
        return [f"scenario {scenario}: no rollout yet"]
    lines = [
        f"scenario {scenario}: rollout {view['rollout_id']} {view['state']}, canary share {view['share']:g}",
        f"  candidate {str(view['candidate_release_id'])[:12]} vs incumbent {str(view['incumbent_release_id'])[:12]}",
    ]
    for arm, stats in view["arms"].items():
        low, high = stats["interval"] or (None, None)
        lines.append(
            f"  {arm:<9} {stats['requests']} requests, {stats['errors']} failed, {stats['reports']} reports, "
            f"mean {_number(stats['mean'])} in [{_number(low)}, {_number(high)}]"
        )
    low, high = (view.get("difference") or {}).get("interval") or (None, None)
    lines.append(f"  difference (candidate - incumbent) in [{_number(low)}, {_number(high)}]")
    if view.get("decision"):
        lines.append(f"  decision: {view['decision']} ({view.get('decided_by')}): {view.get('reason')}")
    return lines
