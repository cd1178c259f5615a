"""`filtered_sft`: supervised fine-tuning on the demonstrations of well-scored reports only.

A report carries a `score` and `metadata.demonstration` (the answer the model should have given) and cites the
inference it corrects (`references`). Reports scored below `min_score` are stored and counted as skipped
(`below_min_score`); the rest train the `sft` loss on the cited prompt. Held-out reports become gate tasks scored by
`f1`, so a candidate is published only if it answers them better. Chosen with
`--learning.recipe tests.examples.filtered_sft:FilteredSFT`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from reef.learning.recipe_config import RecipeConfig
from reef.learning.report import Metadata, Report
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.weights import WeightsRecipe


class FilteredSFTConfig(RecipeConfig):
    """`learning.recipe_config` of `filtered_sft`: unknown keys are refused at start, naming the key."""

    min_score: float = Field(0.5, description="reports scored below this are not trained on")


class Demonstration(Metadata):
    """The report's `metadata`: the answer the model should have given (other keys are kept, not read)."""

    demonstration: str | None = Field(None, min_length=1, description="the answer the model should have given")


class FilteredReport(Report):
    """filtered_sft trains from `metadata.demonstration` on the cited inference's prompt, for reports scored at
    least `min_score`; any other well-formed report is stored and skipped (below_min_score, no_demonstration,
    no_prompt)."""

    metadata: Demonstration | None = None  # validated when posted: a malformed demonstration is a 400 naming it


class FilteredProcessor(ReportJoiningProcessor[FilteredReport]):
    """One unit per well-scored report: the cited prompt with the demonstration as its completion."""

    def __init__(self, units_per_batch: int, min_score: float) -> None:
        super().__init__(units_per_batch, FilteredReport)  # each stored report arrives parsed as FilteredReport
        self.min_score = min_score

    def join(self, report: FilteredReport, cited: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, cited)  # the report's id and its cited inferences' ids
        demonstration = report.metadata.demonstration if report.metadata else None
        prompt = cited[0].prompt() if cited else None  # {"messages": [...], "tools"?} or {"prompt_ids": [...]}
        if report.score is None or report.score < self.min_score:
            self.skip(record_ids, "below_min_score")
        elif demonstration is None:
            self.skip(record_ids, "no_demonstration")
        elif prompt is None:
            self.skip(record_ids, "no_prompt")
        else:
            self.add_unit(record_ids, [{**prompt, "completion_text": demonstration}])

    def gate_task(self, report: FilteredReport, cited: list[CitedInference]) -> dict[str, Any] | None:
        demonstration = report.metadata.demonstration if report.metadata else None
        if demonstration is None or not cited or not cited[0].messages:
            return None
        return {"id": report.agent_record_id, "messages": cited[0].messages, "checker": "f1", "answer": demonstration}

    def held_out_rule(self) -> str | None:
        return "reports with metadata.demonstration that cite a chat request"


class FilteredSFT(WeightsRecipe):
    """SFT on the demonstrations of reports scored at least `min_score`."""

    name: ClassVar[str] = "filtered_sft"
    loss_name: ClassVar[str] = "sft"  # a built-in loss, or "package.module:function"
    config_model: ClassVar[type[FilteredSFTConfig]] = FilteredSFTConfig
    report_model: ClassVar[type[Report]] = FilteredReport
    recipe_config: FilteredSFTConfig

    def processor(self) -> FilteredProcessor:
        return FilteredProcessor(self.settings.learning.batch_size, self.recipe_config.min_score)
