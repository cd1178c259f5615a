"""The `chat` adapter at serving time: a release's harness as a plain chat agent's system prompt and example turns.

Memory items that are worked examples (`Q: <question>\\nA: <answer>`) become earlier user/assistant turns before the
conversation (a small model imitates solved turns far better than examples described in its system prompt; see
docs/results/2026-12-05-harness-methods.md); every other node renders into the system prompt.
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from pathlib import Path

from reef.harness.render import render
from reef.harness.tree import TREE_FILE, HarnessTree, load_tree

SYSTEM_PROMPT_FILE = "system_prompt.md"
MAX_EXAMPLE_TURNS = 32  # the newest examples, so a long memory cannot crowd the model's context out
_EXAMPLE = re.compile(r"Q: (?P<question>.+?)\nA: (?P<answer>.+)", re.DOTALL)


@dataclasses.dataclass(frozen=True, slots=True)
class ChatHarness:
    """What the chat adapter adds to a request: a system prompt and worked examples as earlier turns."""

    system_prompt: str | None = None
    example_turns: tuple[tuple[str, str], ...] = ()


def chat_harness_for(release_dir: Path | None) -> ChatHarness:
    """The chat harness of the release at `release_dir` (empty when it holds no tree)."""
    if release_dir is None:
        return ChatHarness()
    tree_path = Path(release_dir) / TREE_FILE
    if not tree_path.is_file():
        return ChatHarness()
    stat = tree_path.stat()
    return _cached(str(tree_path), stat.st_mtime_ns, stat.st_size)


def chat_harness_of(tree: HarnessTree) -> ChatHarness:
    """The chat harness of an in-memory tree."""
    turns: list[tuple[str, str]] = []
    rest = []
    for node in tree:
        match = _EXAMPLE.fullmatch(node.text.strip()) if node.kind == "memory" else None
        if match:
            turns.append((match["question"].strip(), match["answer"].strip()))
        else:
            rest.append(node)
    text = render(HarnessTree.of(rest), "chat").get(SYSTEM_PROMPT_FILE, "").strip()
    return ChatHarness(text or None, tuple(turns[-MAX_EXAMPLE_TURNS:]))


def system_prompt_for(release_dir: Path | None) -> str | None:
    """The system prompt the `chat` adapter gives the release at `release_dir`; None if it has none."""
    return chat_harness_for(release_dir).system_prompt


def system_prompt_of(tree: HarnessTree) -> str | None:
    """The `chat` system prompt of an in-memory tree (None when it renders to nothing)."""
    return chat_harness_of(tree).system_prompt


@lru_cache(maxsize=256)
def _cached(tree_path: str, mtime_ns: int, size: int) -> ChatHarness:
    # Materialized releases are immutable, so (path, mtime, size) is a safe cache key on the serving path.
    return chat_harness_of(load_tree(Path(tree_path).parent))
