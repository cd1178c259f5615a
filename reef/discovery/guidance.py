"""Guidance-TTT's two prompts: the guide sees only a parent's summary and score and answers with advice in a
`<guidance>…</guidance>` block; a frozen executor turns the parent plus that advice into the attempt.

Left free, SmolLM2 never writes the block (0 of 16 answers to the guide's prompt held it; most rambled to the token
limit), so every attempt would score 0 without the executor ever running. `GUIDE_RESPONSE_FORMAT` asks an engine that
honours `response_format` for the block itself, as a JSON string: `"<guidance>…</guidance>"`, with at most 160
characters of advice (about 40 tokens: it ends well within an attempt's token budget).
"""

from __future__ import annotations

import json
import re
from typing import Any

from reef.discovery.archive import Entry
from reef.discovery.problem import Problem

_GUIDANCE = re.compile(r"<guidance>(.+?)</guidance>\s*$", re.DOTALL)
MAX_GUIDANCE_CHARS = 1_000
GUIDE_RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "guidance",
        "strict": True,
        "schema": {"type": "string", "pattern": "^<guidance>[^<>]{8,160}</guidance>$"},
    },
}

GUIDE_PROMPT = """{task}

The current attempt scores {score} ({better} is better). Checker: {summary}
Give one short, concrete piece of advice for improving it. End your answer with <guidance>your advice</guidance>."""


def guide_prompt(problem: Problem, entry: Entry) -> str:
    """What the guide (the trained model) is asked: the task, the parent's score and the checker's summary only."""
    return GUIDE_PROMPT.format(
        task=problem.task,
        score="invalid" if entry.score is None else f"{entry.score:.6g}",
        better="higher" if problem.direction == "max" else "lower",
        summary=entry.details.strip()[-300:] or "(none)",
    )


def executor_prompt(problem: Problem, entry: Entry, guidance: str) -> str:
    """What the frozen executor is asked: the usual improvement prompt with the guide's advice appended."""
    return f"{problem.prompt(entry.solution, entry.score, entry.details)}\nAdvice: {guidance}"


def parse_guidance(answer: str) -> str | None:
    """The advice in the `<guidance>` block that ends `answer` (or the JSON string `answer` is: what
    GUIDE_RESPONSE_FORMAT asks for), or None when it is missing, empty or too long."""
    try:
        decoded = json.loads(answer)
    except ValueError:
        decoded = None
    found = _GUIDANCE.search((decoded if isinstance(decoded, str) else answer).strip())
    advice = found.group(1).strip() if found else ""
    return advice if 0 < len(advice) <= MAX_GUIDANCE_CHARS else None
