"""What the harness routes serve from a release: its files rendered for an adapter, its tree, and metadata."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest, Forbidden
from reef.core.releases import Release
from reef.core.views import HarnessView
from reef.harness.admission import refuse_credentials
from reef.harness.catalog import load_adapter
from reef.harness.mutations import Mutation, apply_mutations, parse_mutations
from reef.harness.render import render
from reef.harness.tree import HarnessTree, load_tree

MAX_REASON_CHARS = 4_000


def stored_files(release_dir: Path) -> dict[str, str]:
    """Every text file of a release directory as stored (`harness.json`, method state), by relative path."""
    root = Path(release_dir)
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            try:
                files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return files


SKILL_PATH = "skills/SKILL.md"  # where the reference client's `fetch_skill` / `sync_skill` read a tree's skill


def harness_view(release: Release, release_dir: Path, adapter: str) -> HarnessView:
    """The `GET /reef/harness` body: release ids (`artifact_version` is the reference client's name for the release
    id), the files rendered for `adapter` (written by the client as they come), the stored tree, evaluation,
    requires."""
    chosen = load_adapter(adapter)
    tree = load_tree(release_dir)
    files = render(tree, chosen)
    skills = tree.of_kind("skill")
    if skills and SKILL_PATH not in files:
        files[SKILL_PATH] = render(HarnessTree.of(skills[:1]), "pi")[f"skills/{skills[0].name}/SKILL.md"]
    metrics = release.shown_metrics()
    evaluation = {
        key: metrics[key] for key in metrics if key not in ("consumed_record_ids", "proposer_reply", "proposer_replies")
    }
    return {
        "release_id": release.release_id,
        "artifact_version": release.release_id,
        "parent_release_id": release.parent_release_id,
        "content_id": release.content_id,
        "step": release.step,
        "operation": release.operation,
        "adapter": adapter,
        "files": dict(sorted(files.items())),
        "tree": tree.to_json(),
        "stored_files": stored_files(release_dir),  # the release as committed (what the console diffs)
        "evaluation": evaluation,
        "requires": chosen.requires,
    }


def check_proposal(
    body: dict[str, Any], release_dir: Path | None, allowed_kinds: Collection[str] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Validate `{mutations, reason}` against the serving tree (a dry run); returns (mutations JSON, reason).

    With `allowed_kinds` (an agent token's proposal) a mutation that creates, changes or removes a node of any other
    kind is refused (Forbidden naming the node) before anything else about it is checked."""
    unknown = set(body) - {"mutations", "reason", "session", "release_id"}
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)}", field="body")
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
        raise BadRequest(f"must be a string of at most {MAX_REASON_CHARS} characters", field="reason")
    refuse_credentials(reason, "reason")
    for name in ("session", "release_id"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise BadRequest("must be a string", field=name)
    mutations = parse_mutations(body.get("mutations"))
    tree = load_tree(release_dir) if release_dir is not None else HarnessTree()
    if allowed_kinds is not None:
        _refuse_kinds(tree, mutations, allowed_kinds)
    apply_mutations(tree, mutations)
    return [m.to_json() for m in mutations], reason


def _refuse_kinds(tree: HarnessTree, mutations: list[Mutation], allowed_kinds: Collection[str]) -> None:
    """Forbidden naming the first mutation whose node (created, or already in `tree`) is of a kind not allowed."""
    for i, mutation in enumerate(mutations):
        existing = tree.get(mutation.node_id)
        kinds = {node.kind for node in (mutation.node, existing) if node is not None}
        refused = sorted(kinds - set(allowed_kinds))
        if refused:
            raise Forbidden(
                f"mutations[{i}]: node {mutation.node_id!r} is a {refused[0]} node; an agent token may propose only "
                f"{', '.join(allowed_kinds) or 'no'} nodes (harness.agent_proposal_kinds), any other needs an admin "
                "token"
            )
