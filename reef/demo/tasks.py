"""The demo's bundled suite of verifiable tasks and how answers to them are graded.

Every family has a short, unambiguous answer that base SmolLM2 knows but buries in a sentence
("The number is 26."), so what the model has to learn in a few LoRA steps is to answer with only
the answer. Instances are drawn from disjoint pools of words and numbers per split, so no held-out
prompt is ever seen in training.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any


def _pool(words: str) -> list[str]:
    return words.split()


# Disjoint pools per split: training, validation (the learner's gate), test (the reported score).
_POOLS: dict[str, dict[str, list[str]]] = {
    "train": {
        "word": _pool(
            "apple river stone cloud tiger lemon piano garden rocket copper candle forest "
            "ocean window dragon pencil butter castle mirror jungle basket pepper rabbit marble"
        ),
        "name": _pool("Maria Peter Olga Samir Lucy Tomas Nina Omar Clara Victor Elena Hugo"),
        "city": _pool("Paris Tokyo Cairo Lima Oslo Rome Madrid Berlin Dublin Prague Vienna Delhi"),
        "color": _pool("red green blue yellow purple black"),
    },
    "validation": {
        "word": _pool("anchor button cotton falcon ginger helmet kettle ladder meadow napkin"),
        "name": _pool("Sofia Daniel Irene Felix Marta Oscar"),
        "city": _pool("Lisbon Athens Warsaw Sydney Toronto Nairobi"),
        "color": _pool("white orange pink"),
    },
    "test": {
        "word": _pool(
            "bottle cherry desert engine feather goblet harbor insect jacket kitten lantern "
            "magnet needle oyster parrot quiver ribbon shadow turtle velvet"
        ),
        "name": _pool("Laura Martin Julia Pablo Anna George Rosa Ivan Emma Kevin"),
        "city": _pool("London Moscow Beijing Seoul Chicago Boston Bangkok Havana Geneva Milan"),
        "color": _pool("brown gray silver gold"),
    },
}
_UNITS = ("kg", "km", "minutes", "dollars", "pages", "people")
_THINGS = ("parcel", "trip", "meeting", "ticket", "book", "crowd")
_NAME_SENTENCES = ("Yesterday {} bought a lamp.", "{} plays the violin.", "The letter was written by {}.")
_CITY_SENTENCES = ("We flew to {} in May.", "The conference is held in {}.", "My cousin lives in {}.")
_COLOR_SENTENCES = ("The car was painted {}.", "She wore a {} scarf.", "The {} door was locked.")
_SPLIT_RESIDUE = {"train": 0, "validation": 1, "test": 2}


@dataclasses.dataclass(frozen=True, slots=True)
class DemoTask:
    """One task instance: the prompt to send and the one right answer."""

    family: str
    prompt: str
    answer: str
    # Messages the deployment puts before every question (e.g. a system prompt naming the answer's form).
    context: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        return [*({"role": role, "content": text} for role, text in self.context), self.question()]

    def question(self) -> dict[str, str]:
        """The user's question alone, without the deployment's context."""
        return {"role": "user", "content": self.prompt}

    def to_evaluation_row(self, grading: str = "exact") -> dict[str, Any]:
        """The row the learner's evaluation gate reads (`settings.evaluation.tasks`).

        `exact` is graded like `is_exact` (with the built-in `regex` checker); `partial` like `partial_credit`.
        """
        row: dict[str, Any] = {"messages": self.messages(), "answer": self.answer, "family": self.family}
        if grading == "partial":
            return {**row, "checker": f"{__name__}:gate_partial_credit"}
        return {**row, "checker": "regex", "pattern": exact_pattern(self.answer)}


def _residue(n: int, split: str) -> int:
    # A number's residue mod 3 names its split, so no number is shared between splits.
    return n - (n % 3) + _SPLIT_RESIDUE[split]


def _pick(rng: random.Random, split: str, pool: str) -> str:
    return rng.choice(_POOLS[split][pool])


def _add(rng: random.Random, split: str) -> DemoTask:
    a, b = _residue(rng.randrange(3, 12), split), rng.randrange(1, 10)
    return DemoTask("add", f"Reply with only the answer. {a} + {b} =", str(a + b))


def _number(rng: random.Random, split: str) -> DemoTask:
    thing, unit = rng.choice(_THINGS), rng.choice(_UNITS)
    n = _residue(rng.randrange(3, 999), split)
    return DemoTask("number", f"Extract the number: 'The {thing} is {n} {unit}.'", str(n))


def _name(rng: random.Random, split: str) -> DemoTask:
    name = _pick(rng, split, "name")
    sentence = rng.choice(_NAME_SENTENCES).format(name)
    return DemoTask("name", f"Who is mentioned: '{sentence}'", name)


def _city(rng: random.Random, split: str) -> DemoTask:
    city = _pick(rng, split, "city")
    sentence = rng.choice(_CITY_SENTENCES).format(city)
    return DemoTask("city", f"Which city is mentioned: '{sentence}'", city)


def _color(rng: random.Random, split: str) -> DemoTask:
    color = _pick(rng, split, "color")
    sentence = rng.choice(_COLOR_SENTENCES).format(color)
    return DemoTask("color", f"What color is mentioned: '{sentence}'", color)


def _repeat(rng: random.Random, split: str) -> DemoTask:
    word = _pick(rng, split, "word")
    return DemoTask("repeat", f"Repeat this word exactly: {word}", word)


def _first_letter(rng: random.Random, split: str) -> DemoTask:
    word = _pick(rng, split, "word")
    return DemoTask("first_letter", f"What is the first letter of {word}?", word[0].upper())


FAMILIES: dict[str, Callable[[random.Random, str], DemoTask]] = {
    "add": _add,
    "number": _number,
    "name": _name,
    "city": _city,
    "color": _color,
    "repeat": _repeat,
    "first_letter": _first_letter,
}
SPLITS = ("train", "validation", "test")


def generate(split: str, count: int, seed: int = 0, families: Sequence[str] | None = None) -> list[DemoTask]:
    """`count` distinct tasks of `split`, cycling through `families` so every family is represented."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}")
    names = list(families or FAMILIES)
    rng = random.Random(f"{seed}:{split}")
    tasks: list[DemoTask] = []
    seen: set[str] = set()
    attempts = 0
    while len(tasks) < count:
        attempts += 1
        if attempts > count * 200:
            break  # a small pool (few words) cannot give more distinct prompts
        task = FAMILIES[names[len(tasks) % len(names)]](rng, split)
        if task.prompt not in seen:
            seen.add(task.prompt)
            tasks.append(task)
    return tasks


def normalize(text: str) -> str:
    """The answer as graded: trimmed, one trailing period and surrounding quotes dropped."""
    text = text.strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    return text


def exact_pattern(answer: str) -> str:
    """A regex that accepts exactly what `is_exact` accepts, for the evaluation gate's `regex` checker."""
    body = re.escape(answer)
    return rf"^\s*(?:{body}|\"{body}\"|'{body}'|`{body}`)\s*(?:\.\s*)?$"


def is_exact(task: DemoTask, text: str) -> bool:
    return normalize(text) == task.answer


def contains_answer(task: DemoTask, text: str) -> bool:
    """The answer appears as a whole token (so "4" is not found inside "14")."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(task.answer)}(?![A-Za-z0-9])", text) is not None


def partial_credit(task: DemoTask, text: str) -> float:
    """The reward for RL: 1 exact; 0.2-0.8 when the answer is in the text, more the shorter the text; else 0.

    Base SmolLM2 states most answers inside a sentence, so "contains" gives a signal from the first
    step and the brevity term pulls it toward answering with only the answer.
    """
    if is_exact(task, text):
        return 1.0
    if not contains_answer(task, text):
        return 0.0
    extra_words = max(0, len(text.split()) - 1)
    brevity = max(0.0, 1.0 - extra_words / 6)
    return round(0.2 + 0.6 * brevity, 4)


def gate_partial_credit(text: str, task: Any) -> float:
    """`partial_credit` as an evaluation checker (`package.module:function` called with the gate's task)."""
    return partial_credit(DemoTask("", "", str(task.answer)), text)


def training_rounds(
    prompts_per_round: int, rounds: int, seed: int, families: Sequence[str] | None = None
) -> Iterator[list[DemoTask]]:
    """Endless rounds of training prompts (of `families`, or all): distinct while the pools last, then reused."""
    pool = generate("train", max(rounds * prompts_per_round * 2, 64), seed=seed, families=families)
    index = 0
    while True:
        yield [pool[(index + i) % len(pool)] for i in range(prompts_per_round)]
        index += prompts_per_round
