"""The `regex` checker's patterns, matched by RE2: time linear in the text whatever the pattern, so a task's
pattern cannot backtrack without bound on the event loop (Python's `re` can: `(a+)+$` against `aaa…ab`).

RE2's syntax is Python's less backreferences and lookaround (a pattern that uses them is refused when the task is
added). One difference is smoothed over: like Python's, `$` also matches before a final newline.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's 400, not a line in the server log
_OPTIONS.max_mem = 8 << 20  # the compiled program's memory: a larger pattern is refused


class PatternError(ValueError):
    """A pattern RE2 cannot compile (bad syntax, a backreference or lookaround, or too large)."""


@cache
def compile_pattern(pattern: str) -> Any:
    """The compiled pattern; PatternError says why it cannot be."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        raise PatternError(f"{reason} (RE2 syntax: no backreferences or lookaround)") from None


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether `pattern` is found in `text` (`re.search`), in time linear in the text."""
    compiled = compile_pattern(pattern)
    if compiled.search(text) is not None:
        return True
    # Python's `$` also matches before a trailing newline; RE2's only at the very end.
    return text.endswith("\n") and compiled.search(text[:-1]) is not None
