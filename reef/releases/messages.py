"""Readable commit messages, so `git log` on the release repository tells the story of each scenario."""

from __future__ import annotations

import json
from typing import Any

from reef.core.releases import shown_metrics


def commit_message(manifest: dict[str, Any]) -> str:
    """E.g. `scenario demo: training step 3 (published)`, then recipe, content id and metrics in the body."""
    scenario = manifest["scenario"]
    operation = manifest["operation"]
    state = "pending" if manifest["pending"] else "published"
    source = manifest.get("source_release_id")
    if source:
        subject = f"scenario {scenario}: {operation} to {source[:12]} (step {manifest['step']}, {state})"
    elif operation == "creation":
        subject = f"scenario {scenario}: creation ({state})"
    else:
        subject = f"scenario {scenario}: {operation} step {manifest['step']} ({state})"
    body = [
        f"recipe: {manifest['recipe'] or '-'}",
        f"content: {manifest['content_id']} ({len(manifest['files'])} files)",
    ]
    metrics = shown_metrics(
        manifest["metrics"],
        manifest.get("consumed_record_ids"),
        manifest.get("trained_from"),
        manifest.get("lineage_base"),
    )
    if metrics:
        body.append("")
        body.append("metrics:")
        body.extend(f"  {key}: {json.dumps(value)}" for key, value in sorted(metrics.items()))
    return subject + "\n\n" + "\n".join(body) + "\n"
