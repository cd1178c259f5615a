"""The quickstarts' code and commands as the README and the quickstart page show them (one source: the pages)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs/getting-started/quickstart.md")
FIRST_LINE = "# quickstart.py"  # quickstart (a): a model that learns from demonstrations
HARNESS_FIRST_LINE = "# harness.py"  # quickstart (b): an agent harness


def fenced_blocks(text: str, language: str) -> list[str]:
    return [match.group(1) for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)]


def quickstart_code(page: Path, first_line: str = FIRST_LINE) -> str:
    """The python block of `page` that starts with `first_line`."""
    (code,) = [block for block in fenced_blocks(page.read_text(), "python") if block.startswith(first_line)]
    return code


def command_line(page: Path, prefix: str, containing: str = "") -> list[str]:
    """The words of the page's first `sh` line that starts with `prefix` and contains `containing`."""
    for block in fenced_blocks(page.read_text(), "sh"):
        for line in block.splitlines():
            if line.startswith(prefix) and containing in line:
                return shlex.split(line.split(" #", 1)[0])
    raise AssertionError(f"{page}: no `{prefix} … {containing} …` command")


def serve_flags(page: Path, recipe: str = "sft") -> list[str]:
    """The flags of the page's `reef serve … --learning.recipe RECIPE …` command (what a quickstart runs)."""
    return command_line(page, "reef serve ", f"--learning.recipe {recipe}")[2:]


def discover_arguments(page: Path) -> list[str]:
    """The arguments of the page's `reef discover …` command (quickstart (c))."""
    return command_line(page, "reef discover ")[2:]
