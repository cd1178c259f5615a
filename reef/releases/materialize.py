"""Writing a release's files out as a read-only local directory, cached by release id.

The tree is written into a temp directory next to the cache entry and renamed into place only when complete,
so a reader never sees half a release and a crash leaves at most a stray `.tmp-*` directory. Files are not
fsync'd (that cost dominated a cold materialize); instead a cache entry found on disk is checked against the
release's content id before it is trusted, and rewritten if a power loss left it incomplete.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.releases.content import content_id_of_directory
from reef.releases.git_command import GitRepository
from reef.releases.lfs import LfsObjects, parse_pointer

_READ_ONLY_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_READ_ONLY_DIR = _READ_ONLY_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def materialize_commit(
    git: GitRepository,
    lfs: LfsObjects,
    commit_id: str,
    manifest: dict[str, Any],
    cache_dir: Path,
    fetch_lfs: Callable[[str], None],
) -> Path:
    """The cached directory for `commit_id`, written first if missing; `fetch_lfs(commit_id)` brings LFS objects."""
    destination = cache_dir / commit_id
    if destination.is_dir():
        if content_id_of_directory(destination) == manifest["content_id"]:
            return destination
        remove_tree(destination)
    manifest_files: dict[str, dict[str, Any]] = manifest["files"]
    cache_dir.mkdir(parents=True, exist_ok=True)
    blob_ids = _blob_ids(git, commit_id)
    paths = sorted(manifest_files)
    blobs = git.read_blobs([blob_ids[path] for path in paths])
    lfs_oids = {
        path: parse_pointer(blob) for path, blob in zip(paths, blobs, strict=True) if manifest_files[path]["lfs"]
    }
    if any(not lfs.has(oid) for oid in lfs_oids.values()):
        fetch_lfs(commit_id)
    temp = cache_dir / f".tmp-{commit_id}-{uuid.uuid4().hex}"
    try:
        for path, blob in zip(paths, blobs, strict=True):
            target = temp / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in lfs_oids:
                shutil.copyfile(lfs.path(lfs_oids[path]), target)
            else:
                target.write_bytes(blob)
            target.chmod(_READ_ONLY_DIR if manifest_files[path]["executable"] else _READ_ONLY_FILE)
        temp.mkdir(exist_ok=True)
        _seal(temp)
        try:
            os.rename(temp, destination)
        except OSError:
            if not destination.is_dir():
                raise
            remove_tree(temp)  # another thread or process materialized it first; theirs is identical
    except BaseException:
        if temp.exists():
            remove_tree(temp)
        raise
    return destination


def _blob_ids(git: GitRepository, commit_id: str) -> dict[str, str]:
    listing = git.run("ls-tree", "-r", "-z", "--full-tree", commit_id).stdout.decode()
    found: dict[str, str] = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        found[path] = meta.split()[2]
    return found


def _seal(root: Path) -> None:
    """Make every directory under `root` read-only, deepest first (files were sealed as written)."""
    for directory, _, _ in sorted(os.walk(root), key=lambda walked: -len(walked[0])):
        os.chmod(directory, _READ_ONLY_DIR)


def remove_tree(root: Path) -> None:
    """Delete a sealed tree (restoring write permission first)."""
    for directory, _, _ in os.walk(root):
        os.chmod(directory, stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)
