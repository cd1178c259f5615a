"""`reef discover --report`: one self-contained HTML page with the best-so-far curves (trained, frozen and random
arms) and a picture of the best construction (SVG circles for circle packing, the step function for Erdős' overlap);
with `--seeds K`, the means over the seeds and each seed's figures."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

WIDTH, HEIGHT, PAD = 560, 260, 40


COLOURS = {"trained": "#1f77b4", "frozen": "#999", "random": "#d62728"}


def write_discover_report(path: Path, result: dict[str, Any]) -> None:
    """Write the page to `path`."""
    curves = {name: list(curve) for name, curve in (result.get("curves") or {}).items() if curve}
    picture = _picture(result.get("problem"), result.get("best_solution"))
    summary = {
        k: result.get(k)
        for k in (
            "problem",
            "recipe",
            "seed_best",
            "best",
            "control_best",
            "random_best",
            "best_known",
            "steps",
            "valid_fraction",
            "wall_s",
        )
    }
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(json.dumps(v))}</td></tr>" for k, v in summary.items()
    )
    path.write_text(
        "<!doctype html><meta charset=utf-8><title>reef discover</title>"
        "<style>body{font:14px system-ui;margin:2em}td,th{padding:2px 8px;text-align:left}</style>"
        f"<h1>reef discover · {html.escape(str(result.get('problem')))}</h1><table>{rows}</table>"
        f"<h2>Best so far, per step</h2>{_curves(curves)}<h2>Best construction</h2>{picture}{_seeds(result)}"
    )


def _seeds(result: dict[str, Any]) -> str:
    """Each seed's seed best, trained best and control bests (`--seeds K`)."""
    keys = ("seed_best", "best", "control_best", "random_best")
    rows = "".join(
        f"<tr><td>{html.escape(str(r.get('seed')))}</td>"
        + "".join(f"<td>{html.escape(json.dumps(r.get(k)))}</td>" for k in keys)
        + "</tr>"
        for r in result.get("seeds") or []
    )
    if not rows:
        return ""
    head = "".join(f"<th>{k}</th>" for k in keys)
    return f"<h2>Per seed</h2><table><tr><th>seed</th>{head}</tr>{rows}</table>"


def _curves(curves: dict[str, list[float | None]]) -> str:
    values = [v for curve in curves.values() for v in curve if v is not None]
    if not values:
        return "<p>no steps</p>"
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    steps = max(len(c) for c in curves.values()) - 1 or 1
    lines = []
    for name, curve in curves.items():
        colour = COLOURS.get(name, "#000")
        points = " ".join(
            f"{PAD + i * (WIDTH - 2 * PAD) / steps:.1f},{HEIGHT - PAD - (v - low) / span * (HEIGHT - 2 * PAD):.1f}"
            for i, v in enumerate(curve)
            if v is not None
        )
        lines.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{name}</title></polyline>"
        )
    legend = f'<text x="{PAD}" y="16">blue: trained · grey: frozen · red: random · {low:.4f} … {high:.4f}</text>'
    return f'<svg width="{WIDTH}" height="{HEIGHT}" style="border:1px solid #ddd">{legend}{"".join(lines)}</svg>'


def _picture(problem: Any, solution: str | None) -> str:
    try:
        value = json.loads(solution or "null")
    except ValueError:
        value = None
    if problem == "circle-packing" and isinstance(value, list):
        size = 300
        circles = "".join(
            f'<circle cx="{x * size:.1f}" cy="{(1 - y) * size:.1f}" r="{r * size:.1f}" '
            'fill="#1f77b455" stroke="#1f77b4"/>'
            for x, y, r in value
        )
        return f'<svg width="{size}" height="{size}" style="border:1px solid #333">{circles}</svg>'
    if problem == "erdos-min-overlap" and isinstance(value, list) and value:
        width = 300 / len(value)
        bars = "".join(
            f'<rect x="{i * width:.1f}" y="{150 - float(v) * 150:.1f}" width="{width:.1f}" '
            f'height="{float(v) * 150:.1f}" fill="#1f77b4"/>'
            for i, v in enumerate(value)
        )
        return f'<svg width="300" height="150" style="border:1px solid #333">{bars}</svg>'
    return f"<pre>{html.escape(solution or '')}</pre>"
