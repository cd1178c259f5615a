"""How `reef demo --stream` shows its figures: the terminal tables, the `--json` document, the HTML report (the matrix
of lesson taught × lesson measured per arm, and the curves drawn as inline SVG)."""

from __future__ import annotations

import argparse
import html
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

_WIDTH, _HEIGHT = 640, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 150, 16, 44
_COLORS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#9a6700", "#57606a", "#bf3989", "#0a3069")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 960px; color: #1f2328; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 2rem; } h3 { font-size: 1rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin-bottom: 1rem; }
th, td { border-bottom: 1px solid #d0d7de; padding: 4px 10px; text-align: right; }
th { background: #f6f8fa; } td.text { text-align: left; } .muted { color: #656d76; } .error { color: #cf222e; }
"""

FIGURES = (
    ("final_average", "final average"),
    ("mean_peak", "mean peak"),
    ("final_over_peak", "final ÷ mean peak"),
    ("mean_forgetting", "mean forgetting"),
    ("mean_transfer", "mean transfer"),
)


def finish_stream(result: dict[str, Any], args: argparse.Namespace, console: Console) -> None:
    """Write the HTML report if asked for, print the tables, and with `--json` the result on stdout."""
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(render_stream_report(result), encoding="utf-8")
        console.print(f"  report written to {args.report}")
    print_stream(result, console)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


def print_stream(result: dict[str, Any], console: Console) -> None:
    """One row per arm with the stream's figures, then each arm's per-lesson forgetting and transfer."""
    arms = result["stream"]["arms"]
    table = Table(title=f"stream of {len(result['stream']['lessons'])} lessons · held-out {result['metric']}")
    for column in ("arm", "recipe", "final", "peak", "final/peak", "forgetting", "transfer", "wall s"):
        table.add_column(column)
    for name, arm in arms.items():
        table.add_row(name, arm["recipe"], *(_shown(arm[key]) for key, _ in FIGURES), f"{arm['wall_s']:.0f}")
    console.print(table)
    console.print("  final: final average · peak: mean peak · forgetting, transfer: their means over the lessons")
    for name, arm in arms.items():
        console.print(
            f"  {name}: learning curve {_listed(arm['learning_curve'])} · forgetting per lesson "
            f"{_listed(arm['forgetting'])} · transfer per lesson {_listed(arm['transfer'])}"
            + (f" · [red]{arm['error']}[/]" if arm.get("error") else "")
        )
    console.print(f"  transfer: the last score on a lesson minus {result['stream']['transfer_alone']}")


def render_stream_report(result: dict[str, Any]) -> str:
    """The whole HTML page of a stream result (the `--json` document)."""
    stream = result["stream"]
    arms: dict[str, Any] = stream["arms"]
    lessons = len(stream["lessons"])
    summary = "".join(
        f"<tr><td class='text'>{_e(name)}</td><td class='text'>{_e(arm['summary'])}</td>"
        + "".join(f"<td>{_shown(arm[key])}</td>" for key, _ in FIGURES)
        + f"<td>{arm['wall_s']:.0f}</td></tr>"
        for name, arm in arms.items()
    )
    head = "".join(f"<th>{_e(label)}</th>" for _, label in FIGURES)
    curves = {name: list(enumerate(arm["learning_curve"], start=1)) for name, arm in arms.items()}
    per_arm = "".join(_arm_section(name, arm, lessons) for name, arm in arms.items())
    error = f"<p class='error'>error: {_e(result['error'])}</p>" if result.get("error") else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Reef demo · stream of {lessons} lessons</title>
<style>{_STYLE}</style></head><body>
<h1>Reef demo · a stream of {lessons} lessons</h1>
<p>Each lesson is its own invented catalogue; after each lesson, the held-out score ({_e(result.get("metric"))}) of
every lesson so far is measured through the API. Forgetting: a lesson's best score before the last measurement
minus its score at the last. Transfer: its score at the last measurement minus {_e(stream["transfer_alone"])}.</p>
<p class="muted">wall time {float(result.get("wall_s") or 0):.0f} s · seed {_e(result.get("seed"))}</p>
{error}
<h2>Arms</h2>
<table><tr><th>arm</th><th>what it is</th>{head}<th>wall s</th></tr>{summary}</table>
<h2>Learning curve (mean held-out score of the lessons taught so far)</h2>
{lines_svg(curves, lessons, "lessons taught")}
{per_arm}
</body></html>
"""


def _arm_section(name: str, arm: dict[str, Any], lessons: int) -> str:
    """An arm's matrix (lesson taught × lesson measured, cells shaded by score) and each lesson's curve."""
    matrix: list[list[float]] = arm["matrix"]
    head = "".join(f"<th>lesson {j + 1}</th>" for j in range(lessons))
    rows = "".join(
        f"<tr><th>after lesson {i + 1}</th>"
        + "".join(_cell(row[j] if j < len(row) else None) for j in range(lessons))
        + "</tr>"
        for i, row in enumerate(matrix)
    )
    figures = "".join(
        f"<tr><th>{label}</th>" + "".join(f"<td>{_shown(v)}</td>" for v in arm[key]) + "</tr>"
        for key, label in (("before", "before it was taught"), ("peaks", "peak"), ("forgetting", "forgetting"),
                           ("transfer", "transfer"))
    )  # fmt: skip
    by_lesson = {f"lesson {j + 1}": [(i + 1, matrix[i][j]) for i in range(j, len(matrix))] for j in range(len(matrix))}
    error = f"<p class='error'>{_e(arm['error'])}</p>" if arm.get("error") else ""
    return f"""<h2>Arm <code>{_e(name)}</code>: {_e(arm["summary"])}</h2>{error}
<p class="muted">reef serve {_e(" ".join(arm.get("serve_command") or []))}</p>
<h3>Held-out score: lesson taught (rows) × lesson measured (columns)</h3>
<table><tr><th></th>{head}</tr>{rows}{figures}</table>
<h3>Each lesson's score after every later lesson</h3>
{lines_svg(by_lesson, lessons, "lessons taught")}"""


def lines_svg(series: dict[str, list[tuple[int, float]]], last_x: int, x_label: str) -> str:
    """An SVG line chart of named series of scores in [0, 1] against 1 … `last_x`, with a legend on the right."""
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    span = max(last_x - 1, 1)

    def xy(x: float, y: float) -> tuple[float, float]:
        return _LEFT + plot_w * (x - 1) / span, _TOP + plot_h * (1.0 - max(0.0, min(1.0, y)))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="held-out score by {_e(x_label)}">'
    ]
    for tick in range(6):
        _, y = xy(1, tick / 5)
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{tick / 5:.1f}</text>')
    for number in range(1, last_x + 1):
        x, _ = xy(number, 0)
        parts.append(f'<text x="{x:.1f}" y="{_TOP + plot_h + 16}" font-size="11" text-anchor="middle">{number}</text>')
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 8}" font-size="12" text-anchor="middle">{_e(x_label)}</text>'
    )
    for index, (name, points) in enumerate(series.items()):
        color = _COLORS[index % len(_COLORS)]
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(a, b) for a, b in points))
        parts.append(f'<polyline points="{coordinates}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for a, b in points:
            x, y = xy(a, b)
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>{_e(name)} after lesson {a}: '
                f"{b:.2f}</title></circle>"
            )
        legend_y = _TOP + 10 + 16 * index
        parts.append(f'<rect x="{_LEFT + plot_w + 12}" y="{legend_y - 6}" width="12" height="4" fill="{color}"/>')
        parts.append(f'<text x="{_LEFT + plot_w + 30}" y="{legend_y}" font-size="11">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _cell(value: float | None) -> str:
    """A matrix cell shaded from white (0) to green (1)."""
    if value is None:
        return "<td></td>"
    light = round(100 - 45 * max(0.0, min(1.0, value)))
    return f"<td style='background: hsl(130, 45%, {light}%)'>{value:.2f}</td>"


def _shown(value: Any) -> str:
    return f"{float(value):.2f}" if isinstance(value, int | float) else "–"


def _listed(values: list[Any]) -> str:
    return " ".join(_shown(v) for v in values) or "–"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)
