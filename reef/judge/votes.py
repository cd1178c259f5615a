"""What a judge is asked, and how its answers become a turn's reward and hints. Pure functions.

The prompt (`judge_prompt`) shows the judge the conversation, the assistant's answer and the next state (what the
user or tool said next), and asks for a score in `\\boxed{}`: +1 (the next state shows the answer served the user),
−1 (it shows the answer was wrong, too long, off-style, or had to be corrected), 0 (it says nothing either way);
after a −1, a line `Hint: …` saying in one sentence what the answer should have done instead.

A turn gets `votes` answers. `parse_vote` reads each (anything unparseable is 0); `plurality` takes the most
common vote (a tie is 0); the hints of the −1 votes go through `dedupe_hints`: equal up to case and spacing
counted once, shortest first, at most `max_hints`.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence
from typing import Any

from reef.judge.sessions import message_text

_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d+)\s*\}")
_LABELLED = re.compile(r"\b(?:score|vote|reward)\s*[:=]\s*([+-]?\d+)\b", re.IGNORECASE)
_BARE = re.compile(r"\s*([+-]?[01])\s*[.!]?\s*")
_HINT = re.compile(r"^\s*hint\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
VALUES = (-1, 0, 1)

SYSTEM_PROMPT = (
    "You are a process reward judge. You read one turn of a conversation between a user and an assistant, and "
    "the NEXT STATE: the message that came after the assistant's answer (the user's next message or a tool's "
    "result). Judge the answer only by what the next state reveals.\n"
    "- Score +1 if the next state shows the answer served the user (they moved on, thanked, or the tool "
    "succeeded).\n"
    "- Score -1 if the next state shows the answer was wrong, unhelpful, too long, off-style, or had to be "
    "corrected or repeated (a complaint, a correction, an error).\n"
    "- Score 0 if the next state says nothing either way.\n"
    "End with the score in a box: \\boxed{1}, \\boxed{-1} or \\boxed{0}. After a -1, add one line "
    "'Hint: <what the answer should have done instead, in one sentence>'."
)


def judge_prompt(messages: Sequence[dict[str, Any]], answer: str, next_state: dict[str, Any]) -> str:
    """The user message the judge gets for one turn (after `SYSTEM_PROMPT`)."""
    history = "\n".join(f"[{m.get('role', '?')}] {message_text(m)}" for m in messages)
    return (
        f"CONVERSATION SO FAR:\n{history}\n\n"
        f"ASSISTANT'S ANSWER:\n{answer}\n\n"
        f"NEXT STATE [{next_state.get('role', '?')}]:\n{message_text(next_state)}\n\n"
        "Score the assistant's answer."
    )


def parse_vote(text: Any) -> int:
    """A vote in {−1, 0, +1} from a judge's reply: the last `\\boxed{v}`, else the last `score: v`, else a bare
    `v`; any other reply, or a value outside {−1, 0, 1}, is 0. An int is taken as is when it is a valid vote."""
    if isinstance(text, bool):
        return 0
    if isinstance(text, int):
        return text if text in VALUES else 0
    if not isinstance(text, str):
        return 0
    for pattern in (_BOXED, _LABELLED):
        found = pattern.findall(text)
        if found:
            value = int(found[-1])
            return value if value in VALUES else 0
    bare = _BARE.fullmatch(text)
    return int(bare.group(1)) if bare else 0


def parse_hint(text: Any) -> str | None:
    """The text after the last `Hint:` line of a reply, or None."""
    if not isinstance(text, str):
        return None
    found = _HINT.findall(text)
    hint = found[-1].strip() if found else ""
    return hint or None


def plurality(votes: Sequence[int]) -> int:
    """The most common vote; 0 for a tie between the most common, or for no votes."""
    counts = collections.Counter(votes).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return 0
    return counts[0][0]


def dedupe_hints(hints: Sequence[str | None], max_hints: int = 3) -> list[str]:
    """Distinct hints (equal up to case and spacing count once), shortest first, at most `max_hints`."""
    seen: dict[str, str] = {}
    for hint in hints:
        if not hint or not hint.strip():
            continue
        text = " ".join(hint.split())
        seen.setdefault(text.casefold(), text)
    return sorted(seen.values(), key=lambda h: (len(h), h))[: max(0, max_hints)]
