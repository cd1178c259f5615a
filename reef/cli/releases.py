"""`reef releases`, `reef rollback`, `reef promote`: a running server's release history, and moving its head.

Each command talks HTTP to the server (`--url`, `--token`; env REEF_URL, REEF_TOKEN). A release id may be
abbreviated to any unique prefix, as with git.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from reef.cli.server_call import CommandError, call
from reef.cli.status import add_server_flags


def add_release_commands(subparsers: Any) -> None:
    """Register `releases`, `rollback` and `promote` on the `reef` argument parser."""
    listing = subparsers.add_parser("releases", help="list a scenario's releases, newest first")
    listing.add_argument("scenario")
    listing.add_argument("--json", action="store_true", help="print the raw JSON")
    add_server_flags(listing)
    listing.set_defaults(handler=run_releases)
    for name, verb in (("rollback", "serve an earlier release again"), ("promote", "serve a pending release")):
        parser = subparsers.add_parser(name, help=f"{verb}, published as a new release (history is kept)")
        parser.add_argument("scenario")
        parser.add_argument("release_id", help="the release to serve (a unique prefix is enough)")
        add_server_flags(parser)
        parser.set_defaults(handler=run_republish, operation=name)


def run_releases(args: argparse.Namespace) -> int:
    try:
        releases = _fetch_releases(args)
    except CommandError as error:
        print(f"reef: {error}")
        return 1
    if args.json:
        print(json.dumps({"releases": releases}, indent=2))
        return 0
    Console().print(releases_table(args.scenario, releases))
    return 0


def run_republish(args: argparse.Namespace) -> int:
    try:
        release_id = _resolve_release_id(args)
        release = _request(args, "POST", f"{args.operation}", {"release_id": release_id})
    except CommandError as error:
        print(f"reef: {error}")
        return 1
    Console().print(
        f"scenario [bold]{args.scenario}[/] now serves [bold]{release['release_id'][:12]}[/] "
        f"({args.operation} of {release_id[:12]}, parent {str(release.get('parent_release_id'))[:12]})"
    )
    return 0


def releases_table(scenario: str, releases: list[dict[str, Any]]) -> Table:
    """One row per release: id, parent, operation, step, recipe, state, time and metrics."""
    table = Table(title=f"releases of {scenario} (newest first)")
    for column in ("release", "parent", "operation", "step", "recipe", "state", "created", "metrics"):
        # Ids keep 12 characters (enough to pass back to rollback); metrics wrap when the terminal is narrow.
        table.add_column(column, no_wrap=column != "metrics", min_width=12 if column in ("release", "parent") else None)
    for release in releases:
        state = "serving" if release.get("current") else "pending" if release.get("pending") else ""
        created = release.get("created_at")
        table.add_row(
            str(release.get("release_id", ""))[:12],
            str(release.get("parent_release_id") or "-")[:12],
            str(release.get("operation", "")),
            str(release.get("step", "")),
            str(release.get("recipe") or "-"),
            f"[bold green]{state}[/]" if state == "serving" else state,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created)) if created else "",
            ", ".join(f"{k}={_short(v)}" for k, v in sorted((release.get("metrics") or {}).items())),
        )
    return table


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def _fetch_releases(args: argparse.Namespace) -> list[dict[str, Any]]:
    return list(_request(args, "GET", "releases").get("releases") or [])


def _resolve_release_id(args: argparse.Namespace) -> str:
    """The full id for `args.release_id`, which may be a unique prefix of one."""
    if len(args.release_id) >= 40:
        return str(args.release_id)
    matches = [r["release_id"] for r in _fetch_releases(args) if r["release_id"].startswith(args.release_id)]
    if len(matches) != 1:
        found = "no release" if not matches else f"{len(matches)} releases"
        raise CommandError(f"{found} of {args.scenario} start with {args.release_id!r}")
    return str(matches[0])


def _request(args: argparse.Namespace, method: str, route: str, body: dict[str, Any] | None = None) -> Any:
    return call(args, method, f"/reef/scenarios/{args.scenario}/{route}", body)
