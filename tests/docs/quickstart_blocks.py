"""The quickstart's code and commands as the README and the quickstart page show them (one source: the pages)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs/getting-started/quickstart.md")
FIRST_LINE = "# quickstart.py"


def fenced_blocks(text: str, language: str) -> list[str]:
    return [match.group(1) for match in re.finditer(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)]


def quickstart_code(page: Path) -> str:
    """The python block of `page` that starts with `# quickstart.py`."""
    (code,) = [block for block in fenced_blocks(page.read_text(), "python") if block.startswith(FIRST_LINE)]
    return code


def serve_flags(page: Path) -> list[str]:
    """The flags of the page's `reef serve … --learning.recipe sft …` command (what the quickstart runs)."""
    for block in fenced_blocks(page.read_text(), "sh"):
        for line in block.splitlines():
            if line.startswith("reef serve ") and "--learning.recipe sft" in line:
                return shlex.split(line)[2:]
    raise AssertionError(f"{page}: no `reef serve … --learning.recipe sft` command")
