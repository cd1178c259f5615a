"""A release's content: the files of a directory, their digests, and the content id that names them all."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from pathlib import Path

from reef.core.errors import BadRequest

MANIFEST_NAME = "reef-release.json"
ATTRIBUTES_NAME = ".gitattributes"
# Both names are written by the store at the root of every release tree, so content may not use them there.
RESERVED_NAMES = frozenset({MANIFEST_NAME, ATTRIBUTES_NAME})
_CHUNK_BYTES = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class ContentFile:
    """One regular file of a content directory; `path` is relative, with `/` separators."""

    path: str
    source: Path
    sha256: str
    size_bytes: int
    executable: bool

    def to_manifest(self, lfs: bool) -> dict[str, object]:
        return {"sha256": self.sha256, "size_bytes": self.size_bytes, "executable": self.executable, "lfs": lfs}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def scan_content(content: Path) -> list[ContentFile]:
    """Every regular file under `content`, sorted by path; refuses symlinks, odd names and reserved names."""
    if not content.is_dir():
        raise BadRequest(f"release content must be a directory: {content}", field="content")
    found: list[ContentFile] = []
    for directory, _, names in os.walk(content):
        for name in names:
            source = Path(directory) / name
            relative = source.relative_to(content).as_posix()
            if "\n" in relative or "\0" in relative:
                raise BadRequest(f"file names may not hold newlines: {relative!r}", field="content")
            if relative in RESERVED_NAMES:
                raise BadRequest(f"{relative} is reserved for the release store", field="content")
            mode = source.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise BadRequest(f"only regular files can be released, not links: {relative}", field="content")
            found.append(
                ContentFile(
                    path=relative,
                    source=source,
                    sha256=file_sha256(source),
                    size_bytes=source.stat().st_size,
                    executable=bool(mode & stat.S_IXUSR),
                )
            )
    return sorted(found, key=lambda f: f.path)


def content_id(files: list[ContentFile]) -> str:
    """The digest of the content: paths, file digests and executable bits, independent of how it is stored."""
    digest = hashlib.sha256()
    for entry in sorted(files, key=lambda f: f.path):
        digest.update(f"{entry.path}\0{entry.sha256}\0{int(entry.executable)}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def content_id_of_directory(content: Path) -> str:
    """The content id the store would give `content`; lets callers and tests compare a materialized tree."""
    return content_id(scan_content(content))
