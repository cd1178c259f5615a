"""`reef status`: what a running server's learners are doing."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """`--url` and `--token` (env REEF_URL, REEF_ADMIN_TOKEN else REEF_TOKEN) for commands that talk to a running
    server (operator commands: rollback, promote, training control need an admin token where one is configured)."""
    parser.add_argument("--url", default=os.environ.get("REEF_URL", "http://127.0.0.1:8900"), help="server URL")
    token = os.environ.get("REEF_ADMIN_TOKEN") or os.environ.get("REEF_TOKEN")
    parser.add_argument("--token", default=token, help="bearer token (env REEF_ADMIN_TOKEN, else REEF_TOKEN)")


def server_headers(args: argparse.Namespace) -> dict[str, str]:
    return {"authorization": f"Bearer {args.token}"} if args.token else {}


def add_status_command(subparsers: Any) -> None:
    parser = subparsers.add_parser("status", help="show each scenario's learner state on a running server")
    add_server_flags(parser)
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    parser.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    try:
        response = httpx.get(f"{args.url.rstrip('/')}/reef/status", headers=server_headers(args), timeout=10)
    except httpx.HTTPError as exc:
        print(f"reef: cannot reach {args.url}: {exc}")
        return 1
    if response.status_code != 200:
        print(f"reef: {response.status_code} {response.text}")
        return 1
    status = response.json()
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    replica = f" (replica {status['replica_id']})" if status.get("replica_id") else ""
    table = Table(title=f"Reef {status.get('version', '')} at {args.url}{replica}")
    columns = ("scenario", "learner", "step", "ready", "job", "gate", "last verdict", "current release", "errors")
    for column in columns:
        table.add_column(column)
    waiting = []
    for name, state in sorted((status.get("scenarios") or {}).items()):
        last = state.get("last_commit") or {}
        gate = state.get("gate") or {}
        if gate.get("waiting"):
            waiting.append(f"{name}: {gate['waiting']}")
        table.add_row(
            name,
            "here" if state.get("leader") else str(state.get("leader_id") or "none"),
            str(state.get("step", "")),
            f"{state.get('ready', '')}/{state.get('batch_size', '')}" if "ready" in state else "",
            str((state.get("job") or {}).get("state", "")),
            f"{gate.get('source')} ({gate.get('tasks')})" if gate else "",
            str(last.get("verdict", "")),
            str(state.get("current_release_id") or "")[:12],
            str(len(state.get("errors") or [])),
        )
    console = Console()
    console.print(table)
    for line in waiting:
        console.print(f"waiting: {line}")
    return 0
