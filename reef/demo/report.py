"""The demo's self-contained HTML report: a summary, a learning curve drawn as inline SVG, and a per-round table."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from reef.demo.controls import summary_rows

_WIDTH, _HEIGHT = 640, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 16, 44

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 960px; color: #1f2328; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border-bottom: 1px solid #d0d7de; padding: 4px 10px; text-align: right; }
th { background: #f6f8fa; } td.text { text-align: left; }
.big { font-size: 2rem; font-weight: 600; } .muted { color: #656d76; }
.published { color: #1a7f37; } .rejected { color: #9a6700; } .skipped, .timeout { color: #cf222e; }
"""


METRIC_NAMES = {"exact": "exact match", "partial": "partial credit", "acceptance": "simulated user's acceptance"}


def learning_curve_points(result: dict[str, Any], metric: str = "exact") -> list[tuple[int, float]]:
    """(round, held-out `metric`) from the baseline (round 0) through every round."""
    points: list[tuple[int, float]] = []
    if result.get(f"baseline_{metric}") is not None:
        points.append((0, float(result[f"baseline_{metric}"])))
    for entry in result.get("rounds") or []:
        if entry.get(f"heldout_{metric}") is not None:
            points.append((int(entry["round"]), float(entry[f"heldout_{metric}"])))
    return points


def curve_svg(
    points: list[tuple[int, float]], partial: list[tuple[int, float]] | None = None, label: str = "exact match"
) -> str:
    """An SVG line chart of scores in [0, 1] against the round number."""
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    last_round = max([x for x, _ in points] + [1])

    def xy(x: float, y: float) -> tuple[float, float]:
        return _LEFT + plot_w * x / last_round, _TOP + plot_h * (1.0 - max(0.0, min(1.0, y)))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="held-out score per round">'
    ]
    for tick in range(6):
        value = tick / 5
        _, y = xy(0, value)
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_WIDTH - _RIGHT}" y2="{y:.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{_LEFT - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{value:.1f}</text>')
    step = max(1, last_round // 12)
    for number in range(0, last_round + 1, step):
        x, _ = xy(number, 0)
        parts.append(
            f'<text x="{x:.1f}" y="{_HEIGHT - _BOTTOM + 16}" font-size="11" text-anchor="middle">{number}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 8}" font-size="12" text-anchor="middle">round</text>'
    )
    parts.append(
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_WIDTH - _RIGHT}" y2="{_TOP + plot_h}" stroke="#57606a"/>'
    )
    for series, color, name in ((partial or [], "#8c959f", "partial credit"), (points, "#0969da", label)):
        if not series:
            continue
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(a, b) for a, b in series))
        parts.append(f'<polyline points="{coordinates}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for a, b in series:
            x, y = xy(a, b)
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"><title>round {a}: {b:.2f}</title></circle>'
            )
        legend_y = _TOP + 14 + (0 if color == "#0969da" else 16)
        parts.append(f'<rect x="{_LEFT + 10}" y="{legend_y - 9}" width="12" height="4" fill="{color}"/>')
        parts.append(f'<text x="{_LEFT + 28}" y="{legend_y - 3}" font-size="11">{name}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_report(result: dict[str, Any]) -> str:
    """The whole HTML page for a demo result (the `--json` object)."""
    accepting = result.get("metric") == "acceptance"  # openclawrl: the simulated user's acceptance alone
    points = learning_curve_points(result, "acceptance" if accepting else "exact")
    partial = None if accepting else learning_curve_points(result, "partial")
    baseline, final = result.get("baseline"), result.get("final")
    headline = (
        "no measurement"
        if baseline is None or final is None
        else f"{baseline:.2f} → {final:.2f} ({final - baseline:+.2f})"
    )
    rows = "".join(_round_row(entry) for entry in result.get("rounds") or [])
    families = _family_table(result.get("baseline_by_family") or {}, result.get("final_by_family") or {})
    settings = "".join(
        f"<tr><td class='text'>{_e(k)}</td><td class='text'>{_e(v)}</td></tr>"
        for k, v in (result.get("settings") or {}).items()
    )
    error = f"<p class='skipped'>error: {_e(result['error'])}</p>" if result.get("error") else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Reef demo · {_e(result.get("recipe"))}</title>
<style>{_STYLE}</style></head><body>
<h1>Reef demo · recipe <code>{_e(result.get("recipe"))}</code></h1>
<p>Held-out score ({_e(METRIC_NAMES.get(result.get("metric") or "exact"))})</p><p class="big">{_e(headline)}</p>
<p class="muted">{result.get("published", 0)} of {len(result.get("rounds") or [])} learner steps published ·
wall time {float(result.get("wall_s") or 0):.0f} s (server start {float(result.get("startup_s") or 0):.0f} s)</p>
{error}
<h2>Beside its controls (same invocation, same held-out tasks)</h2>
{_controls_table(result)}
{_seeds_table(result)}
<h2>Learning curve (held-out test set, measured through the API after each published release)</h2>
{curve_svg(points, partial, METRIC_NAMES["acceptance"] if accepting else "exact match")}
<h2>Rounds</h2>
<table><tr><th>round</th><th>step</th><th>verdict</th><th>train score</th><th>train exact</th>
<th>gate candidate</th><th>gate current</th><th>loss</th><th>held-out {"acceptance" if accepting else "exact"}</th>
<th>held-out partial</th>
<th>round s</th><th>elapsed s</th><th>release · change (harness: source and mutations)</th></tr>
{rows}</table>
<h2>Per task family (held-out exact)</h2>
{families}
<h2>Settings</h2>
<table>{settings}</table>
</body></html>
"""


def write_report(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(result), encoding="utf-8")


def _round_row(entry: dict[str, Any]) -> str:
    verdict = str(entry.get("verdict"))
    cells = [
        _e(entry.get("round")),
        _e(entry.get("step")),
        f"<span class='{_e(verdict)}' title='{_e(entry.get('reason') or '')}'>{_e(verdict)}</span>",
        _number(entry.get("train_score")),
        _number(entry.get("train_exact")),
        _number(entry.get("gate_candidate")),
        _number(entry.get("gate_current")),
        _number(entry.get("loss"), 3),
        _number(entry.get("heldout_acceptance", entry.get("heldout_exact"))),
        _number(entry.get("heldout_partial")),
        _number(entry.get("round_s"), 0),
        _number(entry.get("elapsed_s"), 0),
        _change(entry),
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>\n"


def _change(entry: dict[str, Any]) -> str:
    """The release a step published and, for a harness step, who made its change and what it was."""
    release = _e(str(entry.get("release_id") or "")[:12])
    if not entry.get("mutations"):
        return release
    items = "".join(f"<li>{_e(m)}</li>" for m in entry["mutations"])
    return f"{release} · {_e(entry.get('source'))}<ul class='text'>{items}</ul>"


def _controls_table(result: dict[str, Any]) -> str:
    """The result and every control arm, with their 95 % intervals; the proposer's share for a harness method."""
    rows = "".join(
        f"<tr><td class='text'>{_e(arm)}</td><td>{_number(score)}</td>"
        f"<td>{'–' if interval is None else f'{interval[0]:.2f}–{interval[1]:.2f}'}</td></tr>"
        for arm, score, interval in summary_rows(result)
    )
    share = result.get("proposer_share")
    note = "" if share is None else f"<p>proposer share of the published steps: {_number(share)}</p>"
    return f"<table><tr><th>arm</th><th>score</th><th>95% interval</th></tr>{rows}</table>{note}"


def _seeds_table(result: dict[str, Any]) -> str:
    """Per seed (`--seeds K`): baseline, final and each control."""
    seeds = result.get("seeds") or []
    if not seeds:
        return ""
    names = sorted({name for r in seeds for name in (r.get("controls") or {})})
    head = "".join(f"<th>control: {_e(n)}</th>" for n in names)
    rows = "".join(
        f"<tr><td>{_e(value)}</td><td>{_number(r.get('baseline'))}</td><td>{_number(r.get('final'))}</td>"
        + "".join(f"<td>{_number(((r.get('controls') or {}).get(n) or {}).get('score'))}</td>" for n in names)
        + "</tr>"
        for value, r in zip(result.get("seed_values") or [], seeds, strict=False)
    )
    return f"<h2>Per seed</h2><table><tr><th>seed</th><th>baseline</th><th>final</th>{head}</tr>{rows}</table>"


def _family_table(before: dict[str, float], after: dict[str, float]) -> str:
    rows = "".join(
        f"<tr><td class='text'>{_e(name)}</td><td>{_number(before.get(name))}</td>"
        f"<td>{_number(after.get(name))}</td></tr>"
        for name in sorted(set(before) | set(after))
    )
    return f"<table><tr><th>family</th><th>baseline</th><th>final</th></tr>{rows}</table>"


def _number(value: Any, digits: int = 2) -> str:
    return f"{float(value):.{digits}f}" if isinstance(value, int | float) else "–"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)
