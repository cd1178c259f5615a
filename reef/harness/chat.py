"""The `chat` adapter at serving time: a release's harness as the system prompt of a plain chat agent."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from reef.harness.render import render
from reef.harness.tree import TREE_FILE, HarnessTree, load_tree

SYSTEM_PROMPT_FILE = "system_prompt.md"


def system_prompt_for(release_dir: Path | None) -> str | None:
    """The system prompt the `chat` adapter renders from the release at `release_dir`; None if it has none."""
    if release_dir is None:
        return None
    tree_path = Path(release_dir) / TREE_FILE
    if not tree_path.is_file():
        return None
    stat = tree_path.stat()
    return _cached(str(tree_path), stat.st_mtime_ns, stat.st_size)


def system_prompt_of(tree: HarnessTree) -> str | None:
    """The `chat` system prompt of an in-memory tree (None when it renders to nothing)."""
    text = render(tree, "chat").get(SYSTEM_PROMPT_FILE, "").strip()
    return text or None


@lru_cache(maxsize=256)
def _cached(tree_path: str, mtime_ns: int, size: int) -> str | None:
    # Materialized releases are immutable, so (path, mtime, size) is a safe cache key on the serving path.
    return system_prompt_of(load_tree(Path(tree_path).parent))
