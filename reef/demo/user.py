"""The `openclawrl` demo's simulated user and rule-based judge. **Both are scripted stand-ins, not people and
not a model**: they let the demo run offline and be measured; a real deployment points the judge at a model
(`recipe_config.judge_url`, see the README).

The simulated user asks short questions and wants answers of at most `MAX_WORDS` words. After each answer it
either moves on ("Thanks. <next question>", or "Thanks, bye." at the end of a session) or complains
("Too long. …"). The rule-based judge reads only that reply (the turn's next state), as a model judge would:
a complaint is −1 with a hindsight hint, a thank-you +1, anything else 0.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from reef.judge.base import JudgeRequest

MAX_WORDS = 12
COMPLAINT = f"Too long. Please answer in at most {MAX_WORDS} words."
FAREWELL = "Thanks, bye."
HINT = f"Answer in at most {MAX_WORDS} words: one short sentence, then stop."
_WORD = re.compile(r"\S+")

# Short questions a small model knows something about; each family is a template over a word list.
_FAMILIES: dict[str, tuple[str, list[str]]] = {
    "capital": ("What is the capital of {}?", [
        "France", "Japan", "Italy", "Spain", "Germany", "Egypt", "Canada", "Brazil", "Russia", "China", "India",
        "Kenya", "Mexico", "Peru", "Chile", "Greece", "Norway", "Sweden", "Poland", "Turkey", "Portugal", "Ireland",
        "Austria", "Cuba", "Iran", "Iraq", "Thailand", "Vietnam", "Argentina", "Australia",
    ]),
    "color": ("What color is {}?", [
        "the sky", "grass", "snow", "a banana", "blood", "coal", "a lemon", "an orange", "milk", "a tomato",
        "chocolate", "a carrot", "the sun", "a strawberry", "an emerald", "a crow", "a cucumber", "a pumpkin",
        "sand", "a flamingo", "ivory", "a ruby", "ink", "a plum",
    ]),
    "opposite": ("What is the opposite of {}?", [
        "hot", "big", "up", "fast", "happy", "dark", "old", "early", "hard", "open", "full", "rich", "strong",
        "wet", "loud", "high", "thick", "near", "true", "good", "first", "inside", "heavy", "sharp", "clean",
    ]),
    "legs": ("How many legs does a {} have?", [
        "dog", "spider", "cat", "bird", "horse", "ant", "chicken", "cow", "duck", "beetle", "lion", "frog",
        "goat", "crab", "bee", "sheep", "fly", "mouse", "pig", "tiger",
    ]),
    "plural": ("What is the plural of {}?", [
        "mouse", "child", "foot", "tooth", "goose", "man", "woman", "box", "city", "leaf", "knife", "wolf",
        "person", "cactus", "fish", "baby", "potato", "bus", "church", "story", "life", "ox",
    ]),
    "made": ("What is {} made of?", [
        "ice", "bread", "glass", "paper", "cheese", "butter", "a candle", "a brick", "wine", "steel", "a pencil",
        "chocolate", "soap", "a tire", "rope", "wool", "a coin", "yogurt", "jam", "concrete",
    ]),
    "sound": ("What sound does a {} make?", [
        "cow", "dog", "cat", "duck", "sheep", "lion", "owl", "horse", "pig", "frog", "snake", "bee", "rooster",
        "wolf", "goat", "mouse", "donkey", "crow",
    ]),
    "sum": ("What is {} plus {}?", []),
}  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """One question the simulated user may ask, with its family (for per-family figures)."""

    text: str
    family: str


def questions(seed: int = 0) -> dict[str, list[Question]]:
    """The question bank split three ways, disjoint: `test` (5 per family, the held-out measurement),
    `validation` (2 per family, the learner's gate) and `training` (the rest, asked in sessions)."""
    rng = random.Random(seed)
    splits: dict[str, list[Question]] = {"test": [], "validation": [], "training": []}
    for family, (template, words) in _FAMILIES.items():
        if family == "sum":
            pairs = [(a, b) for a in range(2, 10) for b in range(2, 10) if a < b]
            items = [Question(template.format(a, b), family) for a, b in pairs]
        else:
            items = [Question(template.format(word), family) for word in words]
        rng.shuffle(items)
        splits["test"] += items[:5]
        splits["validation"] += items[5:7]
        splits["training"] += items[7:]
    rng.shuffle(splits["training"])
    return splits


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def accepts(answer: str) -> bool:
    """Whether the simulated user accepts an answer: not empty, at most `MAX_WORDS` words."""
    return 0 < word_count(answer) <= MAX_WORDS


def reply(answer: str, next_question: str | None) -> str:
    """The simulated user's next message after `answer`: a complaint, or a thank-you (with the next question)."""
    if not accepts(answer):
        return COMPLAINT
    return f"Thanks. {next_question}" if next_question else FAREWELL


def gate_acceptance(text: str, task: Any) -> float:
    """The learner's gate checker (`package.module:function`): 1 when the simulated user would accept `text`."""
    return float(accepts(text))


def judge(request: JudgeRequest) -> dict[str, Any]:
    """The demo's rule-based judge (a scripted stand-in for a judge model): it reads the user's reply only."""
    text = str(request.next_state.get("content") or "")
    if text.startswith("Too long"):
        return {"vote": -1, "hint": HINT}
    if text.startswith("Thanks"):
        return {"vote": 1}
    return {"vote": 0}
