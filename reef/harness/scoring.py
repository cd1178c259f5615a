"""Scoring a harness tree on a few tasks through the engine (the chat adapter's system prompt), unrecorded.

Methods use it inside a step (GEPA's minibatches); the learner's paired gate is separate and final.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from reef.core.scenarios import Dialect
from reef.harness.chat import chat_harness_of
from reef.harness.traces import question_of
from reef.harness.tree import HarnessTree
from reef.inference.base import RequestContext
from reef.learning.evaluation import Task, answer_text, check

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def task_from_trace(trace: dict[str, Any]) -> Task | None:
    """A scoreable task from a trace whose feedback names the correct answer (numeric or contains)."""
    expected, question = trace.get("expected"), question_of(trace)
    if expected is None or not question:
        return None
    checker = "numeric" if _NUMBER.fullmatch(str(expected)) else "contains"
    messages = [m for m in trace.get("messages", []) if m.get("role") != "system"] or [
        {"role": "user", "content": question}
    ]
    return Task(task_id=question[:80], messages=messages, checker=checker, answer=expected)


async def score_tree(
    engine: Any,
    scenario: str,
    tree: HarnessTree,
    tasks: list[Task],
    *,
    model: str = "reef",
    max_new_tokens: int = 48,
    max_parallel: int = 4,
) -> list[float]:
    """The tree's score on each task (greedy, chat adapter), in task order."""
    chat = chat_harness_of(tree)
    ctx = RequestContext(scenario, system_prompt=chat.system_prompt, example_turns=chat.example_turns)
    limit = asyncio.Semaphore(max_parallel)

    async def one(task: Task) -> float:
        body = {
            "model": model,
            "messages": [dict(m) for m in task.messages],
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
        }
        async with limit:
            completion = await engine.complete(Dialect.CHAT, body, ctx)
        if completion.status >= 400:
            return 0.0
        return check(task, answer_text(completion.body))

    return list(await asyncio.gather(*(one(task) for task in tasks)))
