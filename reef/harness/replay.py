"""The replay page: one self-contained HTML file telling a scenario's harness history step by step —
each learner step's verdict (published / rejected / skipped / pending), its mutations, the tree diff of what
was published, and the paired scores (candidate vs serving) the gate judged on. No scripts, no external files.
"""

from __future__ import annotations

import html
import json
from typing import Any

from reef.harness.mutations import diff_trees
from reef.harness.tree import HarnessTree, tree_from_json

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;color:#1b1f24;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin:0}.muted{color:#57606a}
.step{border:1px solid #d0d7de;border-left:6px solid #8c959f;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}
.published{border-left-color:#1a7f37}.rejected{border-left-color:#cf222e}.skipped{border-left-color:#9a6700}
.pending{border-left-color:#0969da}.verdict{font-weight:700;text-transform:uppercase;font-size:.8rem}
.published .verdict{color:#1a7f37}.rejected .verdict{color:#cf222e}.skipped .verdict{color:#9a6700}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #d0d7de;padding:.2rem .5rem;text-align:center}
.add{background:#dafbe1}.del{background:#ffebe9}.upd{background:#fff8c5}
pre{white-space:pre-wrap;margin:.2rem 0;font:13px/1.35 ui-monospace,monospace}
ul.chain{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.4rem}
ul.chain li{border:1px solid #d0d7de;border-radius:4px;padding:.2rem .5rem;font:13px ui-monospace,monospace}
"""


def replay_html(
    scenario: str,
    releases: list[dict[str, Any]],
    commits: list[dict[str, Any]],
    trees: dict[str, dict[str, Any]],
) -> str:
    """The page. `releases` oldest first (release JSON), `commits` ascending (commit JSON), `trees` maps a
    release id to its `harness.json` content."""
    parts = [
        "<!doctype html><html lang=en><meta charset=utf-8>",
        f"<title>Reef harness replay: {_e(scenario)}</title><style>{_STYLE}</style>",
        f"<h1>Harness replay — scenario <code>{_e(scenario)}</code></h1>",
        _summary(releases, commits),
        "<h2>Release chain</h2><ul class=chain id=chain>",
    ]
    for release in releases:
        current = " (serving)" if release.get("current") else ""
        parts.append(
            f"<li data-release='{_e(release['release_id'])}'>{_e(release['operation'])} step {release['step']}: "
            f"{_e(release['release_id'][:12])}{current}</li>"
        )
    parts.append("</ul><h2>Steps</h2>")
    for commit in commits:
        parts.append(_step(commit, trees))
    if not commits:
        parts.append("<p class=muted>No learner step yet.</p>")
    parts.append("</html>\n")
    return "\n".join(parts)


def _summary(releases: list[dict[str, Any]], commits: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for commit in commits:
        counts[commit["verdict"]] = counts.get(commit["verdict"], 0) + 1
    text = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) or "no steps"
    return f"<p class=muted id=summary>{len(releases)} releases; steps: {_e(text)}.</p>"


def _step(commit: dict[str, Any], trees: dict[str, dict[str, Any]]) -> str:
    verdict = commit["verdict"]
    metrics = commit.get("metrics") or {}
    head = (
        f"<div class='step {_e(verdict)}' data-step='{commit['step']}' data-verdict='{_e(verdict)}'>"
        f"<h2>Step {commit['step']} <span class=verdict>{_e(verdict)}</span></h2>"
        f"<p>{_e(commit.get('reason', ''))}</p>"
    )
    details = [f"<p class=muted>method {_e(metrics.get('method', '?'))}, source {_e(metrics.get('source', '?'))}</p>"]
    details.append(_scores(commit.get("candidate_scores") or [], commit.get("current_scores") or []))
    release_id, parent_id = commit.get("release_id"), commit.get("parent_release_id")
    if release_id in trees and parent_id in trees:
        details.append("<h3>Tree diff (published)</h3>" + _diff(trees[parent_id], trees[release_id]))
    elif metrics.get("mutations"):
        details.append("<h3>Proposed mutations</h3>" + _mutations(metrics["mutations"]))
    if metrics.get("refused"):
        details.append("<h3>Refused by admission</h3><pre>" + _e("\n".join(metrics["refused"])) + "</pre>")
    return head + "".join(details) + "</div>"


def _scores(candidate: list[float], current: list[float]) -> str:
    if not candidate:
        return "<p class=muted>No paired scores.</p>"
    rows = "".join(
        f"<tr><td>{i + 1}</td><td>{c:g}</td><td>{k:g}</td><td>{_outcome(c, k)}</td></tr>"
        for i, (c, k) in enumerate(zip(candidate, current, strict=False))
    )
    mean_c, mean_k = sum(candidate) / len(candidate), sum(current) / max(len(current), 1)
    return (
        "<table class=scores><tr><th>task</th><th>candidate</th><th>serving</th><th></th></tr>"
        f"{rows}<tr><th>mean</th><th>{mean_c:.3f}</th><th>{mean_k:.3f}</th><th></th></tr></table>"
    )


def _outcome(candidate: float, current: float) -> str:
    return "win" if candidate > current else "loss" if candidate < current else "tie"


def _diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    old, new = tree_from_json(before), tree_from_json(after)
    return _mutations([m.to_json() for m in diff_trees(old, new)], old) or "<p class=muted>No change.</p>"


def _mutations(mutations: list[dict[str, Any]], before: HarnessTree | None = None) -> str:
    rows = []
    for mutation in mutations:
        op = mutation.get("op")
        if op == "create":
            node = mutation.get("node", {})
            label = f"+ {node.get('kind')} {node.get('id')}"
            rows.append(f"<div class=add><pre>{_e(label)}\n{_e(_text(node.get('config', {})))}</pre></div>")
        elif op == "remove":
            old = before.get(mutation.get("id", "")) if before is not None else None
            body = _text(old.config) if old is not None else ""
            rows.append(f"<div class=del><pre>- {_e(mutation.get('id'))}\n{_e(body)}</pre></div>")
        else:
            patch = json.dumps(mutation.get("config", {}), ensure_ascii=False)
            rows.append(f"<div class=upd><pre>~ {_e(mutation.get('id'))} {_e(patch)}</pre></div>")
    return "".join(rows)


def _text(config: dict[str, Any]) -> str:
    if "text" in config:
        return str(config["text"])
    return json.dumps(config, ensure_ascii=False)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
