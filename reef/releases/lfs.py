"""Git LFS for weight files: pointer blobs in the tree, the bytes in `<git dir>/lfs/objects`.

The store writes pointers and objects itself (the layout `git lfs` uses), so a local publish costs no extra
process; `git lfs push/fetch --object-id` move the objects when the repository is a remote. With git-lfs
missing, weight files are stored as plain blobs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
POINTER_VERSION = "https://git-lfs.github.com/spec/v1"
ATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in WEIGHT_SUFFIXES).encode()


def lfs_installed() -> bool:
    return shutil.which("git-lfs") is not None


def is_weight_file(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES)


def pointer(oid: str, size_bytes: int) -> bytes:
    """The pointer blob that stands in the tree for an LFS object."""
    return f"version {POINTER_VERSION}\noid sha256:{oid}\nsize {size_bytes}\n".encode()


def parse_pointer(blob: bytes) -> str:
    """The sha256 object id named by a pointer blob."""
    for line in blob.decode().splitlines():
        if line.startswith("oid sha256:"):
            return line.removeprefix("oid sha256:").strip()
    raise ValueError("not a git-lfs pointer")


class LfsObjects:
    """The content-addressed object directory of one repository (`lfs/objects/ab/cd/abcd…`)."""

    def __init__(self, git_dir: Path) -> None:
        self.root = git_dir / "lfs" / "objects"

    def path(self, oid: str) -> Path:
        return self.root / oid[:2] / oid[2:4] / oid

    def has(self, oid: str) -> bool:
        return self.path(oid).is_file()

    def store(self, source: Path, oid: str) -> None:
        """Copy `source` in under `oid` durably (temp file, fsync, rename), unless it is already there."""
        target = self.path(oid)
        if target.is_file():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(handle, "wb") as out, open(source, "rb") as src:
                shutil.copyfileobj(src, out, 1024 * 1024)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp_name, target)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise
