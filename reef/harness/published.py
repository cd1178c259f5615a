"""What the harness routes serve from a release: its files (stored or rendered for an adapter) and metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest
from reef.core.releases import Release
from reef.harness.admission import refuse_credentials
from reef.harness.catalog import adapter_names, load_adapter
from reef.harness.mutations import apply_mutations, parse_mutations
from reef.harness.render import render
from reef.harness.tree import load_tree

MAX_REASON_CHARS = 4_000


def stored_files(release_dir: Path) -> dict[str, str]:
    """Every text file of a release directory (`harness.json`, method state), by relative path."""
    root = Path(release_dir)
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            try:
                files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return files


def harness_view(release: Release, release_dir: Path, adapter: str | None) -> dict[str, Any]:
    """The `GET /reef/harness` body: release ids, files (rendered for `adapter` when given), evaluation, requires."""
    if adapter:
        files = render(load_tree(release_dir), load_adapter(adapter))
        requires = load_adapter(adapter).requires
    else:
        files = stored_files(release_dir)
        requires = {"adapters": adapter_names()}
    metrics = release.metrics or {}
    evaluation = {
        key: metrics[key] for key in metrics if key not in ("consumed_record_ids", "proposer_reply", "proposer_replies")
    }
    return {
        "release_id": release.release_id,
        "parent_release_id": release.parent_release_id,
        "content_id": release.content_id,
        "step": release.step,
        "operation": release.operation,
        "adapter": adapter,
        "files": files,
        "evaluation": evaluation,
        "requires": requires,
    }


def check_proposal(body: dict[str, Any], release_dir: Path | None) -> tuple[list[dict[str, Any]], str]:
    """Validate `{mutations, reason}` against the serving tree (a dry run); returns (mutations JSON, reason)."""
    unknown = set(body) - {"mutations", "reason"}
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)}", field="body")
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise BadRequest(f"must be a string of at most {MAX_REASON_CHARS} characters", field="reason")
    refuse_credentials(reason, "reason")
    mutations = parse_mutations(body.get("mutations"))
    tree = load_tree(release_dir) if release_dir is not None else None
    if tree is not None:
        apply_mutations(tree, mutations)
    return [m.to_json() for m in mutations], reason
