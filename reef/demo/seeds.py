"""`reef demo --seeds K`: the same demo at K seeds, each with its task instances regenerated from its seed, reported as
means over the seeds with 95 % intervals over the seeds (per-seed results under `seeds`).

Tuning a demo's settings on the seeds it then reports would make its figures look better than they are: the seeds
a figure in the docs comes from are named beside it, and are not those its settings were chosen on.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console

from reef.demo.report import write_report
from reef.demo.result import DemoRun, print_summary

OneRun = Callable[[argparse.Namespace, Console], tuple[int, DemoRun]]


def seed_interval(values: list[float], z: float = 1.96) -> list[float] | None:
    """The normal-approximation 95 % interval of the mean of `values` (one per seed); None for fewer than two."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    half = z * statistics.stdev(values) / math.sqrt(len(values))
    return [round(mean - half, 4), round(mean + half, 4)]


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def aggregate(results: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Means over the per-seed `--json` results, with intervals over the seeds; the per-seed results under `seeds`."""
    first = results[0]

    def figures(key: str) -> list[float]:
        return [float(r[key]) for r in results if isinstance(r.get(key), int | float)]

    controls: dict[str, Any] = {}
    for name in sorted({n for r in results for n in (r.get("controls") or {})}):
        scores = [float(c["score"]) for r in results if (c := (r.get("controls") or {}).get(name))]
        controls[name] = {"score": _mean(scores), "interval": seed_interval(scores), "seeds": len(scores)}
    gains = figures("improvement")
    result: dict[str, Any] = {
        "recipe": first.get("recipe"),
        "metric": first.get("metric"),
        "suite": first.get("suite"),
        "seed_values": seeds,
        "baseline": _mean(figures("baseline")),
        "final": _mean(figures("final")),
        "improvement": _mean(gains),
        "baseline_ci95": seed_interval(figures("baseline")),
        "final_ci95": seed_interval(figures("final")),
        "improvement_ci95": seed_interval(gains),
        "controls": controls,
        "wall_s": round(sum(figures("wall_s")), 1),
        "error": next((r["error"] for r in results if r.get("error")), None),
        "seeds": results,
    }
    if any("proposer_share" in r for r in results):
        result["proposer_share"] = _mean(figures("proposer_share"))
    return result


def run_seeds(args: argparse.Namespace, console: Console, one_run: OneRun) -> tuple[int, dict[str, Any]]:
    """Run the demo at seeds `args.seed`, …, `args.seed + args.seeds - 1`, one after the other; (exit code, means)."""
    seeds = list(range(args.seed, args.seed + args.seeds))
    results, code = [], 0
    for seed in seeds:
        console.print(f"[bold]seed {seed}[/] ({seeds.index(seed) + 1} of {len(seeds)})")
        state_dir = args.state_dir / f"seed-{seed}" if args.state_dir is not None else None
        one_code, run = one_run(argparse.Namespace(**{**vars(args), "seed": seed, "state_dir": state_dir}), console)
        results.append(run.to_json())
        code = code or one_code
    return code, aggregate(results, seeds)


def finish_seeds(result: dict[str, Any], args: argparse.Namespace, console: Console) -> None:
    """The means over seeds: the terminal table, the HTML report if asked for, the JSON on stdout with `--json`."""
    if args.report is not None:
        write_report(args.report, result)
        console.print(f"  report written to {args.report}")
    print_summary(result, console)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
