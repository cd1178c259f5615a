"""Writing a release's git objects with plumbing only: its manifest, its tree (weight files as LFS pointers) and
its commit; and reading a Release back from a manifest. Nothing here moves a ref (`GitReleaseStore` does that).

A release commit's tree holds the full content plus `reef-release.json` (every Release field except its own id,
which is the commit id) and, with LFS, a `.gitattributes`. A release stored before a learner step's own fields
(`consumed_record_ids`, `trained_from`, `lineage_base`) had keys of their own kept them in its `metrics`; they are
read from there. Trees are built in a temporary index (hash-object,
update-index, write-tree), so the bare repository never has a working tree.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reef.core.releases import Release, ReleaseOperation
from reef.releases.content import ATTRIBUTES_NAME, MANIFEST_NAME, ContentFile, content_id
from reef.releases.git_command import GitRepository
from reef.releases.lfs import ATTRIBUTES, LfsObjects, is_weight_file, pointer
from reef.releases.messages import commit_message


def new_manifest(
    scenario: str,
    files: list[ContentFile],
    parent_release_id: str | None,
    operation: ReleaseOperation,
    step: int,
    recipe: str,
    metrics: dict[str, Any] | None,
    *,
    source: dict[str, Any] | None = None,
    pending: bool = False,
    lineage: bool = False,
) -> dict[str, Any]:
    """The manifest of a new release of `files` (its `files` entries are filled in by `write_tree`); `source` is a
    learner step's (`step_source`)."""
    return {
        "format": 1,
        "scenario": scenario,
        "parent_release_id": parent_release_id,
        "content_id": content_id(files),
        "operation": operation,
        "step": step,
        "recipe": recipe,
        "metrics": metrics or {},
        "created_at": time.time(),
        "pending": pending,
        **({"lineage": True} if lineage else {}),
        **(source or {}),
        "files": {},
    }


def step_source(
    consumed_record_ids: Sequence[str] | None, *, trained_from: str | None = None, lineage_base: str | None = None
) -> dict[str, Any]:
    """The manifest keys of a learner step's release: the records it consumed and what it grew from (none for a
    release no step stored)."""
    if consumed_record_ids is None:
        return {}
    source: dict[str, Any] = {"consumed_record_ids": list(consumed_record_ids)}
    if lineage_base is not None:
        source["lineage_base"] = lineage_base
    else:
        source["trained_from"] = trained_from
    return source


def write_tree(
    git: GitRepository, lfs: LfsObjects | None, files: Sequence[ContentFile], manifest: dict[str, Any]
) -> tuple[str, Sequence[str]]:
    """Hash every blob (weight files as LFS pointers when `lfs` is given) and build the tree; (tree id, LFS oids)."""
    with tempfile.TemporaryDirectory(prefix="reef-publish-") as scratch_name:
        scratch = Path(scratch_name)
        sources: list[tuple[str, str, Path]] = []  # (mode, path in tree, file to hash)
        lfs_oids: list[str] = []
        for index, entry in enumerate(files):
            as_pointer = lfs is not None and is_weight_file(entry.path)
            manifest["files"][entry.path] = entry.to_manifest(as_pointer)
            source = entry.source
            if as_pointer:
                assert lfs is not None
                lfs.store(entry.source, entry.sha256)
                lfs_oids.append(entry.sha256)
                source = scratch / f"pointer-{index}"
                source.write_bytes(pointer(entry.sha256, entry.size_bytes))
            sources.append(("100755" if entry.executable else "100644", entry.path, source))
        if lfs_oids:
            (scratch / "attributes").write_bytes(ATTRIBUTES)
            sources.append(("100644", ATTRIBUTES_NAME, scratch / "attributes"))
        (scratch / "manifest").write_bytes(manifest_bytes(manifest))
        sources.append(("100644", MANIFEST_NAME, scratch / "manifest"))
        paths = "".join(f"{source}\n" for _, _, source in sources).encode()
        blob_ids = git.text("hash-object", "-w", "--no-filters", "--stdin-paths", input=paths).split()
        index_info = "".join(
            f"{mode} {blob}\t{path}\0" for (mode, path, _), blob in zip(sources, blob_ids, strict=True)
        )
        env = {"GIT_INDEX_FILE": str(scratch / "index")}
        git.run("update-index", "-z", "--add", "--index-info", input=index_info.encode(), env=env)
        return git.text("write-tree", env=env), lfs_oids


def commit_tree(git: GitRepository, tree_id: str, parent_id: str | None, manifest: dict[str, Any]) -> str:
    """The release commit of `tree_id` (dated by the manifest, so the same release gives the same commit)."""
    stamp = f"{int(manifest['created_at'])} +0000"
    parents = ["-p", parent_id] if parent_id else []
    return git.text(
        "commit-tree",
        tree_id,
        *parents,
        input=commit_message(manifest).encode(),
        env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
    )


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def release_of(commit_id: str, manifest: dict[str, Any]) -> Release:
    """The Release a release commit's manifest describes (a learner step's own fields read from its `metrics` when
    it was stored before they had keys of their own)."""
    m = manifest
    metrics = dict(m["metrics"])
    source = m if "consumed_record_ids" in m else _source_in_metrics(metrics)
    consumed = source.get("consumed_record_ids")
    return Release(
        release_id=commit_id,
        scenario=m["scenario"],
        parent_release_id=m["parent_release_id"],
        content_id=m["content_id"],
        operation=m["operation"],
        step=m["step"],
        recipe=m["recipe"],
        metrics=metrics,
        created_at=m["created_at"],
        pending=m["pending"],
        consumed_record_ids=None if consumed is None else tuple(consumed),
        trained_from=source.get("trained_from"),
        lineage_base=source.get("lineage_base"),
    )


def _source_in_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """A learner step's own fields, taken out of the `metrics` of a release stored before they had keys."""
    if "consumed_record_ids" not in metrics:
        return {}
    return {key: metrics.pop(key) for key in ("consumed_record_ids", "trained_from", "lineage_base") if key in metrics}
