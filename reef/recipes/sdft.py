"""`sdft` (self-distillation fine-tuning): learn a demonstration through the model's own rollout.

Instead of imitating the demonstration token by token (`sft`), the student keeps its own recorded rollout y and
learns, at each of its tokens, the distribution the teacher gives there when the demonstration is in its context:

    L = Σ_t ι_t · KL(T(· | x ⊕ c, y_<t) ‖ S(· | x, y_<t)) / |y|        (forward KL by default; `divergence`)

with x the student's prompt, c the context block (`context_template` around the report's text), T the teacher
(`self` by default: the base model with the adapter disabled, frozen; `ema` optional) and ι_t the capped
importance weight against the recorded log-probs. Because the targets are the model's own distribution nudged
by context rather than foreign text, SDFT is reported to forget less of what the model already did than SFT.

Report: `metadata.teacher_context` (a string) or `metadata.demonstration` (a string, or `{"content": …}`), and
`references` citing the answered inference (the first is used; it needs the local engine's token capture and
chat messages). One unit per report. A held-out report with a `demonstration` becomes a gate task (`f1`).
Every well-formed report is accepted; one it cannot train from is stored and skipped, counted by reason
(`no_context`, `no_references`, `no_training_capture`, `no_messages`). Only a context field that is there but not
a non-empty string is refused.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from reef.learning.report import Metadata, Report, Text, text_of
from reef.recipes.distillation import DistillationConfig, DistillationRecipe
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.sft import HELD_OUT_MAX_TOKENS


class ContextMetadata(Metadata):
    """The `metadata` a distillation report may carry: what the teacher sees besides the prompt."""

    teacher_context: Text | None = Field(None, description="what the teacher sees besides the prompt")
    demonstration: Text | None = Field(None, description="the answer the model should have given (or {content: …})")


class SDFTReport(Report):
    """sdft trains from metadata.teacher_context (or metadata.demonstration) on the cited captured chat rollout; any
    other well-formed report is stored and skipped (no_context, no_references, no_training_capture, no_messages)."""

    metadata: ContextMetadata | None = Field(None, description="recipe-specific fields")

    def demonstration(self) -> str | None:
        """`metadata.demonstration`'s text, or None."""
        return text_of(self.metadata.demonstration) if self.metadata else None

    def teacher_context(self) -> str | None:
        """The teacher's context: `metadata.teacher_context`, else `metadata.demonstration`; None if neither."""
        return (text_of(self.metadata.teacher_context) if self.metadata else None) or self.demonstration()


class SDFTProcessor(ReportJoiningProcessor[SDFTReport]):
    """One unit per report: the cited rollout, with the teacher's prompt carrying the report's context."""

    def __init__(self, units_per_batch: int, recipe: SDFTRecipe) -> None:
        super().__init__(units_per_batch, SDFTReport)
        self.recipe = recipe

    def join(self, report: SDFTReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        context = report.teacher_context()
        sample = rollouts[0].policy_sample() if rollouts else None
        if context is None:
            self.skip(record_ids, "no_context")
        elif sample is None:
            self.skip(record_ids, "no_training_capture" if rollouts else "no_references")
        elif not rollouts[0].messages:
            self.skip(record_ids, "no_messages")
        else:
            teacher_messages = self.recipe.teacher_messages(rollouts[0].messages, context)
            tools = {"tools": rollouts[0].tools} if rollouts[0].tools else {}
            self.add_unit(record_ids, [{**sample, "teacher_messages": teacher_messages, **tools}])

    def held_out_rule(self) -> str | None:
        return "reports with a demonstration in metadata.demonstration that cite a chat request without tools"

    def gate_task(self, report: SDFTReport, rollouts: list[CitedInference]) -> dict[str, Any] | None:
        """A held-out report with a `demonstration` (a known answer) on a chat prompt without tools, scored by `f1`."""
        demonstration = report.demonstration()
        if demonstration is None or not rollouts or not rollouts[0].messages or rollouts[0].tools:
            return None
        return {
            "id": report.agent_record_id,
            "messages": rollouts[0].messages,
            "checker": "f1",
            "answer": demonstration,
            "max_tokens": min(len(demonstration) // 3 + 16, HELD_OUT_MAX_TOKENS),
        }


class SDFTConfig(DistillationConfig):
    """`learning.recipe_config` of the `sdft` recipe."""

    context_template: str = Field(
        "\n\nThe correct reply is:\n{context}", description="how the context block is written; must hold `{context}`"
    )


class SDFTRecipe(DistillationRecipe):
    """Self-distillation fine-tuning on demonstrations (or hints) carried by reports."""

    name: ClassVar[str] = "sdft"
    loss_name: ClassVar[str] = "sdft"
    config_model: ClassVar[type[SDFTConfig]] = SDFTConfig
    report_model: ClassVar[type[Report]] = SDFTReport
    recipe_config: SDFTConfig

    def processor(self) -> SDFTProcessor:
        return SDFTProcessor(self.settings.learning.batch_size, self)


RECIPE = SDFTRecipe
