"""`sft`: learn from demonstrations — the report says what the answer should have been.

Loss (`reef.training.losses.sft_loss`): masked next-token negative log-likelihood of the
demonstration given the cited request's prompt,

    L = − Σ_t m_t · log π(y_t | prompt, y_<t) / Σ_t m_t,   m_t = 1 on the demonstration tokens (+ end of turn).

Report: `metadata.demonstration` (a string, or `{"content": …}`) — or the `feedback` text when the recipe
config sets `demonstration_from_feedback: true` — and `references` naming the answered inference record
(the first is used). Without references, `metadata.messages` may carry the prompt as chat messages.
Every well-formed report is accepted; one without a demonstration (a plain score, say) is stored and skipped
(`no_demonstration`), and only a demonstration that is not a non-empty string is refused.
Sample: `{"prompt_ids" | "messages" (+ "tools"), "completion_text"}`; the training job tokenizes.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from pydantic import Field

from reef.core.errors import BadRequest
from reef.learning.recipe_config import RecipeConfig
from reef.learning.report import Metadata, Report, ReportTaker, Text, narrowed, text_of
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.weights import WeightsRecipe


class DemonstrationMetadata(Metadata):
    """The `metadata` an `sft` report may carry."""

    demonstration: Text | None = Field(None, description="the answer the model should have given (or {content: …})")
    messages: Any = Field(None, description="the prompt as chat messages, for a report that cites no inference")


class SFTReport(Report):
    """sft trains from a demonstration on the prompt of the cited inference (or metadata.messages); any other
    well-formed report is stored and skipped (no_demonstration, no_prompt)."""

    metadata: DemonstrationMetadata | None = Field(None, description="recipe-specific fields")

    def demonstration(self, from_feedback: bool) -> str | None:
        """The demonstration text it carries (its `feedback` text, with `from_feedback`), or None."""
        if from_feedback:
            return self.feedback if isinstance(self.feedback, str) and self.feedback else None
        return text_of(self.metadata.demonstration) if self.metadata else None

    def reported_messages(self) -> dict[str, Any] | None:
        """`metadata.messages` as a prompt, when it is a non-empty list."""
        messages = self.metadata.messages if self.metadata else None
        return {"messages": messages} if isinstance(messages, list) and messages else None

    def check(self, recipe: ReportTaker) -> None:
        # `feedback` may be any object; only text is read as the demonstration, and empty text is none.
        if _from_feedback(recipe) and self.feedback == "":
            raise BadRequest("the demonstration must be a non-empty string", field="feedback")

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        base = cls.model_json_schema()
        if _from_feedback(recipe):
            feedback = {
                "type": ["string", "object"],
                "minLength": 1,
                "description": "text: the answer the model should have given (an object is stored, not trained on)",
            }
            return {**narrowed(base, feedback=feedback), "description": TRAINS_FROM.format(field="`feedback` text")}
        return {**base, "description": TRAINS_FROM.format(field="`metadata.demonstration`")}


class SFTProcessor(ReportJoiningProcessor[SFTReport]):
    """One unit per report: the cited prompt with the demonstration as its completion."""

    replayable: ClassVar[bool] = True

    def __init__(self, units_per_batch: int, demonstration_from_feedback: bool = False) -> None:
        super().__init__(units_per_batch, SFTReport)
        self.demonstration_from_feedback = demonstration_from_feedback

    def join(self, report: SFTReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        demonstration = report.demonstration(self.demonstration_from_feedback)
        prompt = rollouts[0].prompt() if rollouts else report.reported_messages()
        if demonstration is None:
            self.skip(record_ids, "no_demonstration")
        elif prompt is None:
            self.skip(record_ids, "no_prompt")
        else:
            self.add_unit(record_ids, [{**prompt, "completion_text": demonstration}])

    def held_out_rule(self) -> str | None:
        field = "the feedback text" if self.demonstration_from_feedback else "metadata.demonstration"
        return f"reports with a demonstration in {field} on a chat prompt without tools, cited or in metadata.messages"

    def gate_task(self, report: SFTReport, rollouts: list[CitedInference]) -> dict[str, Any] | None:
        """The cited prompt (as chat messages, without tools) with the demonstration as the answer, scored by `f1`."""
        demonstration = report.demonstration(self.demonstration_from_feedback)
        prompt = ({"messages": rollouts[0].messages} if rollouts[0].messages else None) if rollouts else None
        prompt = prompt or report.reported_messages()
        if demonstration is None or prompt is None or (rollouts and rollouts[0].tools):
            return None
        return {
            "id": report.agent_record_id,
            "messages": prompt["messages"],
            "checker": "f1",
            "answer": demonstration,
            # Enough for the answer and a few words around it (about 3 characters a token).
            "max_tokens": min(len(demonstration) // 3 + 16, HELD_OUT_MAX_TOKENS),
        }


HELD_OUT_MAX_TOKENS = 512

TRAINS_FROM = (
    "sft trains from a demonstration ({field}) on the prompt of the cited inference (or metadata.messages); "
    "any other well-formed report is stored and skipped (no_demonstration, no_prompt)"
)


class SFTConfig(RecipeConfig):
    """`learning.recipe_config` of the `sft` recipe."""

    demonstration_from_feedback: bool = Field(
        False, description="take the demonstration from the report's `feedback` instead of `metadata.demonstration`"
    )
    kl_coef: float = Field(0.0, ge=0, description="weight of the KL penalty to the base model (0: none)")


def _from_feedback(recipe: ReportTaker) -> bool:
    return cast(SFTConfig, recipe.recipe_config).demonstration_from_feedback


class SFTRecipe(WeightsRecipe):
    """Supervised fine-tuning on demonstrations carried by reports."""

    name: ClassVar[str] = "sft"
    loss_name: ClassVar[str] = "sft"
    config_model: ClassVar[type[SFTConfig]] = SFTConfig
    report_model: ClassVar[type[Report]] = SFTReport
    recipe_config: SFTConfig

    def processor(self) -> SFTProcessor:
        return SFTProcessor(self.settings.learning.batch_size, self.recipe_config.demonstration_from_feedback)


RECIPE = SFTRecipe
