"""`reef demo --suite catalogue`: facts the base model cannot know, so weights must beat prompting.

An invented catalogue maps product codes (`QX-4821`) to departments (`Garden`). Training prompts ask a code's
department in a few phrasings; held-out prompts ask about the same codes in phrasings never trained on, always in
the same direction (code → department; no reversal). The reported test set is drawn from the whole catalogue, so
what it measures is recall of taught facts under a new wording. The prompt control holds the whole catalogue in its
instruction (`instruction`), which fits SmolLM2's 8,192-token context for a few hundred entries.

The catalogue is regenerated per seed (`--seeds K`). The sft settings that teach it within the demo's budget are
the suite's (`reef.demo.recipes.SUITE_PROFILES`), chosen on seed 100.
"""

from __future__ import annotations

import random
import string

from reef.demo.tasks import DemoTask

CATALOGUE_SIZE = 40
DEPARTMENTS = ("Garden", "Kitchen", "Toys", "Books", "Music", "Sports", "Office", "Pets")
# Phrasings per split: training ones teach, the validation ones gate, the test ones are never trained on.
PHRASINGS: dict[str, tuple[str, ...]] = {
    "train": (
        "Which department sells product {code}? Reply with only the department.",
        "Product {code} belongs to which department? Reply with only the department.",
        "Department of item {code}? Reply with only the department.",
    ),
    "validation": ("In our catalogue, {code} is stocked by which department? Reply with only the department.",),
    "test": (
        "A customer asks where to find {code}. Which department? Reply with only the department.",
        "Name the department responsible for catalogue entry {code}. Reply with only the department.",
    ),
}


def catalogue(seed: int, size: int = CATALOGUE_SIZE) -> dict[str, str]:
    """The invented catalogue of `seed`: `size` distinct codes, each with its department."""
    rng = random.Random(f"catalogue:{seed}")
    codes: dict[str, str] = {}
    while len(codes) < size:
        code = "".join(rng.choices(string.ascii_uppercase, k=2)) + "-" + "".join(rng.choices(string.digits, k=4))
        codes.setdefault(code, rng.choice(DEPARTMENTS))
    return codes


def generate(split: str, count: int, seed: int = 0, size: int = CATALOGUE_SIZE) -> list[DemoTask]:
    """`count` distinct tasks of `split` about the `size`-code catalogue of `seed` (fewer when the phrasings run
    out)."""
    facts = catalogue(seed, size)
    rng = random.Random(f"catalogue:{seed}:{split}")
    pairs = [(code, phrasing) for code in facts for phrasing in PHRASINGS[split]]
    rng.shuffle(pairs)
    return [DemoTask("catalogue", p.format(code=code), facts[code]) for code, p in pairs[:count]]


def answer_form(seed: int) -> tuple[tuple[str, str], ...]:
    """What a deployment that only ever gets scores tells the model before every question: the departments there
    are, and two questions about codes outside the catalogue answered in that form. Base SmolLM2 then names a
    department in most sampled answers, so a 0/1 score has right answers to reinforce from the first round."""
    facts = catalogue(seed)
    rng = random.Random(f"catalogue:{seed}:form")
    turns: list[tuple[str, str]] = [("system", FORM_INSTRUCTION)]
    while len(turns) < 5:
        code = "".join(rng.choices(string.ascii_uppercase, k=2)) + "-" + "".join(rng.choices(string.digits, k=4))
        if code not in facts:
            phrasing = PHRASINGS["train"][len(turns) // 2]
            turns += [("user", phrasing.format(code=code)), ("assistant", rng.choice(DEPARTMENTS))]
    return tuple(turns)


FORM_INSTRUCTION = (
    "You answer questions about our product catalogue. Every product belongs to exactly one department: "
    + ", ".join(DEPARTMENTS[:-1])
    + f" or {DEPARTMENTS[-1]}. Reply with only the department's name."
)


def instruction(seed: int) -> str:
    """The prompt control's instruction: the whole catalogue, then how to answer."""
    table = "\n".join(f"{code}: {department}" for code, department in sorted(catalogue(seed).items()))
    return (
        "You answer questions about our product catalogue. Each line gives a product code and its department.\n"
        f"{table}\nReply with only the department's name."
    )
