"""The task suites of `reef demo --suite`: what is taught, what is held out, and the prompt control's best shot.

`skills` (the default) is the bundled suite of verifiable skills (`reef.demo.tasks`): short answers base SmolLM2
knows but buries in a sentence. `catalogue` teaches facts it cannot know (`reef.demo.catalogue`). Every suite
regenerates its task instances from the seed, and names the instruction its prompt control starts from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

from reef.demo import catalogue, tasks
from reef.demo.tasks import DemoTask

SKILLS_INSTRUCTION = (
    "Answer with only the answer: a number, a name, a word or a single letter, exactly as asked. No sentence, no "
    "explanation, no punctuation."
)


@dataclasses.dataclass(frozen=True, slots=True)
class Suite:
    """A task suite: its splits (regenerated per seed) and the prompt control's instruction."""

    name: str
    generate: Callable[[str, int, int], list[DemoTask]]  # (split, count, seed)
    instruction: Callable[[int], str]  # seed -> the control's system prompt
    # The most solved examples the prompt control shows after its instruction (None: as many as the context holds).
    control_examples: int | None = None
    # seed -> what a deployment fed only 0/1 scores says before every question (`--feedback score`); None: nothing
    answer_form: Callable[[int], tuple[tuple[str, str], ...]] | None = None

    def training_rounds(
        self, prompts_per_round: int, rounds: int, seed: int, families: Sequence[str] | None = None
    ) -> Iterator[list[DemoTask]]:
        """Endless rounds of training prompts: distinct while the split lasts, then reused."""
        if self.name == "skills":
            yield from tasks.training_rounds(prompts_per_round, rounds, seed, families)
            return
        pool = self.generate("train", max(rounds * prompts_per_round, 64), seed)
        index = 0
        while True:
            yield [pool[(index + i) % len(pool)] for i in range(prompts_per_round)]
            index += prompts_per_round


SUITES: dict[str, Suite] = {
    "skills": Suite(
        "skills", lambda split, count, seed: tasks.generate(split, count, seed), lambda seed: SKILLS_INSTRUCTION
    ),
    # The whole catalogue is in the control's instruction; 32 examples scored as well as 120 on a tuning seed, and a
    # context of 120 made the control alone take most of the demo's budget on two cores.
    "catalogue": Suite(
        "catalogue", catalogue.generate, catalogue.instruction, control_examples=32, answer_form=catalogue.answer_form
    ),
}


def suite_named(value: str | Suite, feedback: str = "recipe") -> Suite:
    """The suite `--suite` names, or `value` itself when a demo built its own (a stream's lesson); with `feedback`
    `score`, as a deployment fed only scores serves it (`for_scores`)."""
    suite = value if isinstance(value, Suite) else SUITES[value]
    return for_scores(suite) if feedback == "score" else suite


def for_scores(suite: Suite) -> Suite:
    """`suite` with its answer form (`Suite.answer_form`) before every question of every split: what a deployment
    whose users only score answers would tell its model. The prompt control replaces it with its own instruction."""
    form = suite.answer_form
    if form is None:
        return suite

    def generate(split: str, count: int, seed: int) -> list[DemoTask]:
        context = form(seed)  # once for the split: it regenerates the catalogue
        return [dataclasses.replace(task, context=context) for task in suite.generate(split, count, seed)]

    return dataclasses.replace(suite, generate=generate)
