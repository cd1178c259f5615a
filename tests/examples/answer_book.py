"""`answer_book`: a custom recipe whose release is a book of demonstrated answers, served as worked examples.

Reports carry `feedback: {"prompt": ..., "answer": ...}`; each step adds the batch's answers to the serving book
and the gate decides whether the new book serves better. Any other well-formed report is stored and counted as
skipped (`no_answer`); only a feedback object without its `prompt` and `answer` is refused. Chosen with
`--learning.recipe tests.examples.answer_book:AnswerBook`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.learning.base import Batch, Candidate, Extensions, GrowContext, Processor, Recipe
from reef.learning.recipe_config import RecipeConfig
from reef.learning.report import Report
from reef.learning.surface import HARNESS, ServingPrompt, Surface

BOOK = "answers.json"


class AnswerBookConfig(RecipeConfig):
    """`learning.recipe_config` of `answer_book`: unknown keys are refused at start, naming the key."""

    max_answers: int = Field(100, ge=1, description="answers the book keeps (the newest win)")
    rules: str = Field("Reply with the answer only.", min_length=1, description="the system prompt served")


class AnswerProcessor(Processor):
    """One unit per report that carries a demonstrated answer; a batch stays reserved until acknowledged."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.units: list[dict[str, Any]] = []
        self.reserved: dict[str, list[dict[str, Any]]] = {}
        self.skipped: collections.Counter[str] = collections.Counter()  # /reef/status shows it per scenario

    def ingest(self, record: Record) -> None:
        if record.request_type != "report":
            return
        feedback = (record.payload or {}).get("feedback")
        if isinstance(feedback, dict):
            self.units.append({**feedback, "record_id": record.agent_record_id})
        else:
            self.skipped["no_answer"] += 1

    def ready(self) -> int:
        return len(self.units)

    def build_batch(self, partial: bool = False) -> Batch | None:
        if not self.units or (len(self.units) < self.batch_size and not partial):
            return None
        taken, self.units = self.units[: self.batch_size], self.units[self.batch_size :]
        batch_id = f"answers-{taken[0]['record_id']}"
        self.reserved[batch_id] = taken
        return Batch(batch_id, taken, [unit["record_id"] for unit in taken])

    def acknowledge(self, batch_id: str) -> None:
        self.reserved.pop(batch_id, None)


class AnswerReport(Report):
    """answer_book learns from `feedback: {"prompt", "answer"}`; any other well-formed report is stored and skipped
    (no_answer)."""

    def check(self, recipe: Recipe) -> None:
        feedback = self.feedback  # a report without an answer is well-formed: stored, skipped
        if isinstance(feedback, dict) and not all(isinstance(feedback.get(k), str) for k in ("prompt", "answer")):
            raise BadRequest("an answer must be an object with a `prompt` and an `answer`", field="feedback")


def book_prompt(recipe: AnswerBook, release_dir: Path) -> ServingPrompt:
    """A release served to a chat: the configured rules as its system prompt, the book as worked examples."""
    return recipe.recipe_config.rules, tuple(read_book(release_dir).items())


class AnswerBook(Recipe):
    """Learns a book of demonstrated answers and serves it as worked examples."""

    name: ClassVar[str] = "answer_book"
    # A release is files the recipe writes (not weights), rendered into what a chat is served.
    surface: ClassVar[Surface] = dataclasses.replace(HARNESS, render=book_prompt)
    config_model: ClassVar[type[AnswerBookConfig]] = AnswerBookConfig
    report_model: ClassVar[type[Report]] = AnswerReport
    recipe_config: AnswerBookConfig  # validated from `learning.recipe_config` before the service starts

    def processor(self) -> Processor:
        return AnswerProcessor(self.settings.learning.batch_size)

    def extensions(self) -> Extensions:
        return Extensions(seed=lambda directory: (directory / BOOK).write_text("{}"))

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        book = read_book(parent_dir)
        book.update({unit["prompt"]: unit["answer"] for unit in batch.samples})
        kept = dict(list(book.items())[-self.recipe_config.max_answers :])
        candidate = ctx.work_dir / "candidate"
        candidate.mkdir()
        (candidate / BOOK).write_text(json.dumps(kept, sort_keys=True))
        return Candidate(candidate, {"answers": len(kept), "new_answers": len(batch.samples)})


def read_book(directory: Path | None) -> dict[str, str]:
    """The prompt → answer book a release holds ({} for none)."""
    if directory is None or not (directory / BOOK).exists():
        return {}
    book: dict[str, str] = json.loads((directory / BOOK).read_text())
    return book
