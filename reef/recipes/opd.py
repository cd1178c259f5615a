"""`opd` (on-policy distillation): a frozen teacher grades every token the student itself sampled.

On the student's recorded rollout y ~ S, per token, the sampled-token reverse KL in its score-function form:

    L = Σ_t ι_t · sg(log S(y_t) − log T(y_t)) · log S(y_t) / |y|

so each token is pushed up or down by how much more likely the student made it than the teacher would
(a dense per-token reward −(log S − log T), no score needed); ι_t is the capped importance weight against the
recorded log-probs. The teacher is `recipe_config.teacher` (required: `release:<id>`, `scenario:<name>` or a
same-tokenizer model directory; `self` is accepted and pulls the adapter back toward the base), frozen, prompted
like the student (or with `metadata.teacher_context` through `context_template`).

Report: `references` citing the rollout(s); a `score` is stored, not used. With `accept_multi_turn`, a report
citing several receipts of one conversation trains them as one multi-turn sample (`multi_turn_sample`); without
it, only the first cited receipt is trained on. Every well-formed report is accepted; one it cannot train from is
stored and skipped, counted by reason (`no_references`, `no_training_capture`, `no_messages`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field

from reef.learning.report import Metadata, Report, Text, text_of
from reef.recipes.distillation import DistillationConfig, DistillationRecipe, Divergence
from reef.recipes.reports import CitedInference, ReportJoiningProcessor


def multi_turn_sample(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The turns of one conversation as one sample: the first turn's prompt, then every later token, with a
    `completion_mask` of 1 on the model's own tokens only (the user and tool turns between are context).

    Turn k + 1's recorded prompt must extend turn k's prompt and completion (the chat template rendered the
    earlier answer back as the same tokens); None when it does not, and the turns are trained one by one instead.
    """
    first = samples[0]
    sequence = [*first["prompt_ids"], *first["completion_ids"]]
    completion_mask = [1] * len(first["completion_ids"])
    logprobs = [*first["old_logprobs"]]
    for turn in samples[1:]:
        prompt = list(turn["prompt_ids"])
        if prompt[: len(sequence)] != sequence:
            return None
        between = prompt[len(sequence) :]
        sequence = [*prompt, *turn["completion_ids"]]
        completion_mask += [0] * len(between) + [1] * len(turn["completion_ids"])
        logprobs += [math.nan] * len(between) + list(turn["old_logprobs"])
    completion = sequence[len(first["prompt_ids"]) :]
    return {
        "prompt_ids": first["prompt_ids"],
        "completion_ids": completion,
        "old_logprobs": logprobs,
        "completion_mask": completion_mask,
    }


class TeacherContextMetadata(Metadata):
    """The `metadata` an `opd` report may carry."""

    teacher_context: Text | None = Field(None, description="what the teacher sees besides the prompt")


class OPDReport(Report):
    """opd trains from the captured rollout(s) a report cites (a score is stored, not used); any other well-formed
    report is stored and skipped (no_references, no_training_capture, no_messages)."""

    metadata: TeacherContextMetadata | None = Field(None, description="recipe-specific fields")


class OPDProcessor(ReportJoiningProcessor[OPDReport]):
    """One unit per report: its rollout (or its conversation's turns), the teacher prompted like the student."""

    def __init__(self, units_per_batch: int, recipe: OPDRecipe) -> None:
        super().__init__(units_per_batch, OPDReport)
        self.recipe = recipe
        self.multi_turn = recipe.recipe_config.accept_multi_turn

    def join(self, report: OPDReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        cited = rollouts if self.multi_turn else rollouts[:1]
        usable: list[tuple[CitedInference, dict[str, Any]]] = [
            (r, dict(s)) for r, s in ((r, r.policy_sample()) for r in cited) if s is not None
        ]
        if not usable or len(usable) != len(cited):
            self.skip(record_ids, "no_training_capture" if rollouts else "no_references")
            return
        context = text_of(report.metadata.teacher_context) if report.metadata else None
        if context is not None:
            if any(not r.messages for r, _ in usable):
                self.skip(record_ids, "no_messages")
                return
            teach = self.recipe.teacher_messages
            usable = [(r, {**s, "teacher_messages": teach(r.messages or [], context)}) for r, s in usable]
        samples = [s for _, s in usable]
        if len(samples) > 1 and context is None:
            joined = multi_turn_sample(samples)
            samples = [joined] if joined is not None else samples
        self.add_unit(record_ids, samples)


class OPDConfig(DistillationConfig):
    """`learning.recipe_config` of the `opd` recipe."""

    teacher: str = Field("", description="the frozen teacher, required: `release:<id>`, `scenario:<name>` or a path")
    divergence: Divergence = Field(
        "sampled_reverse_kl", description="the per-token divergence between student and teacher"
    )
    accept_multi_turn: bool = Field(False, description="train a conversation's turns as one multi-turn sample")


class OPDRecipe(DistillationRecipe):
    """On-policy distillation from a frozen teacher, on the student's own rollouts."""

    name: ClassVar[str] = "opd"
    loss_name: ClassVar[str] = "opd"
    config_model: ClassVar[type[OPDConfig]] = OPDConfig
    report_model: ClassVar[type[Report]] = OPDReport
    recipe_config: OPDConfig

    def processor(self) -> OPDProcessor:
        return OPDProcessor(self.settings.learning.batch_size, self)


RECIPE = OPDRecipe
