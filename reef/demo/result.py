"""The result of `reef demo`: what it measured (`DemoRun`, its `--json` form) and how it is shown at the end."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from reef.demo.api import Measurement
from reef.demo.controls import control_json, proposer_share, summary_rows
from reef.demo.report import write_report


@dataclasses.dataclass
class DemoRun:
    """Everything the demo measured; `to_json` is what `--json` prints."""

    recipe: str
    metric: str = "exact"  # which held-out figure is the headline: `exact` or `partial`
    baseline: Measurement | None = None
    final: Measurement | None = None
    rounds: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    startup_s: float = 0.0
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # a recipe's own figures (opd: its teacher)
    suite: str = "skills"
    # Control arms measured in the same invocation on the same held-out tasks (`reef.demo.controls`).
    controls: dict[str, Measurement] = dataclasses.field(default_factory=dict)
    harness: bool = False  # a harness method: `proposer_share` is reported

    def to_json(self) -> dict[str, Any]:
        baseline = self.baseline.score(self.metric) if self.baseline else None
        final = self.final.score(self.metric) if self.final else None
        result = {
            "recipe": self.recipe,
            "metric": self.metric,
            "baseline": baseline,
            "final": final,
            "improvement": round(final - baseline, 4) if baseline is not None and final is not None else None,
            "baseline_ci95": self.baseline.interval(self.metric) if self.baseline else None,
            "final_ci95": self.final.interval(self.metric) if self.final else None,
            "baseline_exact": self.baseline.exact if self.baseline else None,
            "final_exact": self.final.exact if self.final else None,
            "baseline_acceptance": self.baseline.acceptance if self.baseline else None,
            "final_acceptance": self.final.acceptance if self.final else None,
            "baseline_partial": self.baseline.partial if self.baseline else None,
            "final_partial": self.final.partial if self.final else None,
            "baseline_by_family": self.baseline.by_family if self.baseline else None,
            "final_by_family": self.final.by_family if self.final else None,
            "rounds": self.rounds,
            "published": sum(1 for r in self.rounds if r.get("verdict") == "published"),
            "wall_s": round(self.wall_s, 1),
            "startup_s": round(self.startup_s, 1),
            "settings": self.settings,
            "error": self.error,
            "suite": self.suite,
            "controls": {name: control_json(m, self.metric) for name, m in self.controls.items()},
            **({"proposer_share": proposer_share(self.rounds)} if self.harness else {}),
            **self.extra,
        }
        if self.metric == "acceptance":  # openclawrl grades no answer against a known one: no exact / partial figures
            for key in ("baseline_exact", "final_exact", "baseline_partial", "final_partial"):
                del result[key]
        else:
            del result["baseline_acceptance"], result["final_acceptance"]
        return result


def outside_budget(run: DemoRun, taken: float) -> float:
    """Record the `taken` seconds of a control arm as `settings["control_s"]` (summed over arms) and return them.
    The time budget covers the method's rounds: the caller moves its budget's start by what this returns."""
    run.settings["control_s"] = round(run.settings.get("control_s", 0.0) + taken, 1)
    return taken


def finish(run: DemoRun, args: argparse.Namespace, console: Console) -> None:
    """Write the HTML report if asked for, print the headline figures, and with `--json` the result on stdout."""
    result = run.to_json()
    if args.report is not None:
        write_report(args.report, result)
        console.print(f"  report written to {args.report}")
    if run.baseline is not None and run.final is not None and run.metric == "acceptance":
        low, high = result["final_ci95"]
        console.print(
            f"[bold]held-out acceptance {result['baseline']:.2f} → {result['final']:.2f} ({result['improvement']:+.2f})"
            f"[/] (95% interval of the final {low:.2f}–{high:.2f}) in {run.wall_s:.0f} s, "
            f"{result['published']} of {len(run.rounds)} steps published"
        )
    elif run.baseline is not None and run.final is not None:
        console.print(
            f"[bold]held-out {run.metric} {result['baseline']:.2f} → {result['final']:.2f} "
            f"({result['improvement']:+.2f})[/] (95% interval of the final {result['final_ci95'][0]:.2f}–"
            f"{result['final_ci95'][1]:.2f}; exact {run.baseline.exact:.2f} → {run.final.exact:.2f}) "
            f"in {run.wall_s:.0f} s, "
            f"{result['published']} of {len(run.rounds)} steps published"
        )
    print_summary(result, console)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def print_summary(result: dict[str, Any], console: Console) -> None:
    """The result beside its controls, one row each, with the 95 % intervals (over tasks, or over seeds)."""
    over = f"over {len(result['seeds'])} seeds" if result.get("seeds") else "over the held-out tasks"
    table = Table(title=f"held-out {result.get('metric')} · suite {result.get('suite')} · 95% intervals {over}")
    for column in ("arm", "score", "95% interval"):
        table.add_column(column)
    for arm, score, interval in summary_rows(result):
        shown = "–" if interval is None else f"{interval[0]:.2f}–{interval[1]:.2f}"
        table.add_row(arm, "–" if score is None else f"{score:.2f}", shown)
    console.print(table)
    if result.get("proposer_share") is not None:
        console.print(f"  proposer share of the published steps: {result['proposer_share']:.2f}")
