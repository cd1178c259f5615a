"""Checkers: score a model's answer to a task in [0, 1].

Built in: `exact` (whitespace-trimmed equality), `contains` (the answer appears in the text), `regex`
(a search for `pattern`, by RE2 in linear time: `reef.learning.evaluation.patterns`), `numeric` (the last number
in the text equals `answer` within `tolerance`), `f1`
(the harmonic mean of word precision and recall against `answer`, after lower-casing and dropping punctuation:
1 for the same words, partial credit for an answer buried in a sentence; the gate of held-out demonstrations).
Anything else is `package.module:function`, called as `function(text, task) -> float | bool`.
"""

from __future__ import annotations

import collections
import importlib
import math
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from reef.core.errors import BadRequest
from reef.learning.evaluation.patterns import pattern_matches
from reef.learning.evaluation.tasks import Task

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def check(task: Task, text: str) -> float:
    """The score of `text` as an answer to `task`."""
    if task.checker == "exact":
        return float(text.strip() == str(task.answer).strip())
    if task.checker == "contains":
        return float(str(task.answer).strip() in text)
    if task.checker == "regex":
        pattern = task.pattern if task.pattern is not None else str(task.answer)
        return float(pattern_matches(pattern, text))
    if task.checker == "numeric":
        return _numeric(text, task)
    if task.checker == "f1":
        return word_f1(text, str(task.answer))
    if task.checker == "none":  # scored by its `check` alone, which only an agent episode runs
        raise ValueError(f"task {task.task_id} is an agent task (scored by its check): the gate must run the agent")
    return _score(custom_checker(task.checker)(text, task))


def _numeric(text: str, task: Task) -> float:
    numbers = _NUMBER.findall(text)
    if not numbers:
        return 0.0
    # The last number: a model that explains itself ("20 + 2 = 22") usually ends on its answer.
    found = float(numbers[-1].replace(",", ""))
    expected = float(task.answer)
    tolerance = float(task.extra.get("tolerance", 1e-6))
    return float(math.isclose(found, expected, rel_tol=tolerance, abs_tol=tolerance))


def word_f1(text: str, answer: str) -> float:
    """Word-level F1 of `text` against `answer` (multiset overlap of normalized words)."""
    found, expected = _WORD.findall(text.lower()), _WORD.findall(answer.lower())
    if not found or not expected:
        return float(found == expected)
    overlap = sum((collections.Counter(found) & collections.Counter(expected)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(found), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def _score(value: Any) -> float:
    score = float(value)
    if not math.isfinite(score):
        raise ValueError(f"a checker returned a non-finite score: {value!r}")
    return score


@cache
def custom_checker(dotted: str) -> Callable[[str, Task], Any]:
    """Import `package.module:function`; raises BadRequest if it cannot be found."""
    module_name, _, attribute = dotted.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise BadRequest(f"cannot import checker {dotted!r}: {exc}", field="checker")
    if not callable(function):
        raise BadRequest(f"{dotted!r} is not callable", field="checker")
    return function
