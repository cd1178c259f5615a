"""The `reef` command line: serve, demo, status, releases, rollback, promote, train, training, rollout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from reef.cli.demo import add_demo_command
from reef.cli.discover import add_discover_command
from reef.cli.releases import add_release_commands
from reef.cli.rollout import add_rollout_command
from reef.cli.serve import add_serve_command
from reef.cli.status import add_status_command
from reef.cli.training import add_training_commands
from reef.cli.version import version_line


class _PrintVersion(argparse.Action):
    """`--version`, asking git for the commit only when it is given (not on every command)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reef", description="Reef: serve an agent's model, record everything, learn from feedback."
    )
    parser.add_argument("--version", action=_PrintVersion, help="print the version and the commit it was built from")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_serve_command(subparsers)
    add_status_command(subparsers)
    add_demo_command(subparsers)
    add_discover_command(subparsers)
    add_release_commands(subparsers)
    add_training_commands(subparsers)
    add_rollout_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if getattr(args, "takes_overrides", False):
        return int(args.handler(args, extra) or 0)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
