"""The links and anchors of the repository's markdown files, and the documents its other files name."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".txt", ".html", ".js", ".json"}
_FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", flags=re.M)
# A document named in prose or code: `docs/<page>.md`, with an optional `#anchor`, or `tutorials/<name>/<page>.md`.
_NAMED = re.compile(r"(?<![\w/.-])((?:docs|tutorials)/[\w./-]*\.(?:md|png))(#[\w-]+)?")


def tracked_files() -> list[Path]:
    """The repository's files: git's list where this is a checkout, else every file outside hidden folders."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        return sorted(ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file())
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in ROOT.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.parts))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's table of contents (what MkDocs uses) gives a heading."""
    text = re.sub(r"[`*_]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading))
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base = slug(heading)
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}_{n}"
        found.add(name)
    return found


def markdown_links(page: Path) -> Iterator[str]:
    """Every link target in `page` outside code."""
    text = _INLINE_CODE.sub("", _FENCE.sub("", page.read_text()))
    yield from _LINK.findall(text)


def broken_link(page: Path, target: str) -> str | None:
    """Why `target` (a link in `page`) leads nowhere, or None when it resolves (external links are not checked)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None
    path_part, _, anchor = target.partition("#")
    destination = (page.parent / path_part).resolve() if path_part else page
    if not destination.exists():
        return f"{page.relative_to(ROOT)}: {target}: no such file"
    if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
        return f"{page.relative_to(ROOT)}: {target}: no heading with anchor #{anchor}"
    return None


def named_documents(path: Path) -> Iterator[tuple[str, str]]:
    """(document, anchor) for every `docs/….md` or `tutorials/….md` path named in a text file."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return
    for match in _NAMED.finditer(text):
        yield match.group(1), (match.group(2) or "")[1:]
