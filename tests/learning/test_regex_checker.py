"""The `regex` checker matches with RE2, in time linear in the answer: no task pattern can hold the event loop by
backtracking (`(a+)+$` against `aaa…ab` takes Python's `re` longer than the universe has)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reef.core.errors import BadRequest
from reef.demo.tasks import exact_pattern
from reef.learning.evaluation import check, parse_task

CATASTROPHIC = r"^(a+)+$"
ADVERSARIAL = "a" * 64 + "b"


def regex(pattern: str) -> object:
    return parse_task({"prompt": "p", "checker": "regex", "pattern": pattern}, "t")


def test_a_catastrophic_pattern_is_answered_not_backtracked():
    # In a child process so that an engine that backtracks fails this test instead of hanging the run.
    code = (
        "from reef.learning.evaluation import check, parse_task\n"
        f"task = parse_task({{'prompt': 'p', 'checker': 'regex', 'pattern': {CATASTROPHIC!r}}}, 't')\n"
        f"print(check(task, {ADVERSARIAL!r}), check(task, 'aaaa'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.0", "1.0"]


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?<=x)y", r"a(?!b)", r"(?P<n>a)(?P=n)"])
def test_a_pattern_only_a_backtracking_engine_runs_is_refused_when_the_task_is_added(pattern):
    with pytest.raises(BadRequest, match=r"t\.pattern: .*RE2"):
        regex(pattern)


def test_patterns_keep_pythons_meaning_where_tasks_rely_on_it():
    assert check(regex(r"^4$"), "4\n") == 1.0  # `$` before a final newline, as Python's
    assert check(regex(r"^4$"), "4\n\n") == 0.0
    assert check(regex(r"(?i)^paris\.?$"), "PARIS.") == 1.0
    assert check(regex(r"\d+\s*km"), "about 42 km") == 1.0
    for answer in ("Paris", "3.14", "x-y & z #1 ~", "a (b) [c] {d} ^$*+?|\\"):
        pattern = exact_pattern(answer)
        assert check(regex(pattern), f' "{answer}". ') == 1.0
        assert check(regex(pattern), f"{answer}!") == 0.0
