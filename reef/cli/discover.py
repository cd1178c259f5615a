"""`reef discover PROBLEM`: the command; the driver is `reef.demo.discover`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reef.demo.discover import RECIPES
from reef.demo.recipes import seed_count_flag


def add_discover_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "discover",
        help="search one hard problem: the model proposes, a sandboxed checker scores, the model trains",
        description="Start Reef with a discovery recipe and drive a search on PROBLEM through the API.",
    )
    parser.add_argument("problem", help="a built-in (circle-packing, erdos-min-overlap), package.module or directory")
    parser.add_argument("--grid", default="4x4", help="G x R: parents per step x attempts per parent (4x4)")
    parser.add_argument(
        "--steps", type=int, default=50, help="steps at most (50; the time budget usually ends the search first)"
    )
    parser.add_argument("--time-budget", type=float, default=600.0, help="seconds for the whole command (600)")
    parser.add_argument("--recipe", choices=RECIPES, default="tttd", help="tttd (entropic), tttd-mean or guidance_ttt")
    parser.add_argument(
        "--control",
        action="store_true",
        help="also run, for as many steps inside the same budget, the search with training off (frozen) and a random "
        "policy over the same edit menu",
    )
    parser.add_argument(
        "--seeds",
        type=seed_count_flag,
        default=1,
        metavar="K",
        help="run the whole command K times (seeds --seed, --seed+1, …) and report means over them (default 1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the first seed (the random policy's draws)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        help="problem option KEY=VALUE, VALUE as JSON or else text (e.g. n=6, moves=fine)",
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature (1.0: the policy the gradient trains)"
    )
    parser.add_argument("--max-tokens", type=int, default=120, help="tokens per attempt (120)")
    parser.add_argument("--learning-rate", type=float, default=2e-4, help="LoRA learning rate (2e-4)")
    parser.add_argument("--json", action="store_true", help="print only the result JSON on stdout")
    parser.add_argument("--report", type=Path, help="write an HTML report (curves, best construction) here")
    parser.add_argument("--state-dir", type=Path, help="state directory (default: a temporary one, removed)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from reef.demo.discover import run_discover

    return run_discover(args)
