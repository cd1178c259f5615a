"""`rl`: learn from scores on single rollouts (SAO-style policy gradient on the served model's own samples).

Advantage: A = (r − b) / max(s, min_std), where b and s² are exponential moving averages
(decay `baseline_decay`) of the scenario's scores and their spread, taken before r is folded in.
With `baseline_by: KEY`, reports carrying `metadata.KEY` (a task kind, a user, a tool) get a running baseline per
value instead (reports without it share the scenario's), so an easy kind of task does not read as a good answer.
Loss (`reef.training.losses.clipped_policy_loss`), per completion token t of the cited rollout:

    ratio_t = exp(log π(y_t) − log π_recorded(y_t))
    L = − mean_t min(ratio_t · A, clip(ratio_t, 1 − clip_low, 1 + clip_high) · A)  + kl_coef · KL(π ‖ π_base)

The recorded log-probs come from the local engine's capture (`payload.training`); a cited record without it
cannot be learned from and is skipped (counted in `processor.skipped["no_training_capture"]`).
Report: `score` and `references`. Every well-formed report is accepted; one without a score is stored and skipped
(`no_score`), one citing nothing `no_references`. The baseline restarts from the unconsumed records after a restart.
With no gate tasks of its own, a scenario holds out some scored reports as ranked rollouts: the gate asks whether
the candidate ranks them by score better than the serving release (`reef.learning.evaluation.ranking`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from reef.core.errors import BadRequest
from reef.learning.report import Report
from reef.learning.surface import Surface
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.weights import ON_POLICY_WEIGHTS, PolicyGradientConfig, WeightsRecipe


def require_score(report: Report) -> None:
    """Refuse (BadRequest naming `score`) a report without a score: for a report that claims a grid cell of a
    discovery recipe, whose grid is incomplete without it."""
    if report.score is None:
        raise BadRequest("a grid cell needs its finite numeric score", field="score")


class RunningBaseline:
    """Exponential moving mean and variance of a stream of scores."""

    def __init__(self, decay: float, min_std: float, initial: float = 0.0) -> None:
        self.alpha = 1.0 - decay
        self.min_std = min_std
        self.mean = initial
        self.variance = 1.0

    def advantage(self, score: float) -> float:
        """(score − baseline) / running std, then fold `score` into the baseline."""
        advantage = (score - self.mean) / max(math.sqrt(self.variance), self.min_std)
        delta = score - self.mean
        self.mean += self.alpha * delta
        self.variance = (1 - self.alpha) * (self.variance + self.alpha * delta * delta)
        return advantage


class RLReport(Report):
    """rl trains from a score on the cited captured rollout(s); any other well-formed report is stored and skipped
    (no_score, no_references, no_training_capture)."""


class RLProcessor(ReportJoiningProcessor[RLReport]):
    """One unit per scored report: each cited rollout with its recorded log-probs and the report's advantage."""

    def __init__(
        self, units_per_batch: int, new_baseline: Callable[[], RunningBaseline], baseline_by: str | None = None
    ) -> None:
        super().__init__(units_per_batch, RLReport)
        self.new_baseline = new_baseline
        self.baseline_by = baseline_by
        self.baselines: dict[str | None, RunningBaseline] = {}

    def baseline_group(self, report: RLReport) -> str | None:
        """The report's `metadata[baseline_by]` value, or None (the scenario's baseline)."""
        value = report.metadata.get(self.baseline_by) if self.baseline_by and report.metadata else None
        return None if value is None else str(value)

    def baseline_for(self, report: RLReport) -> RunningBaseline:
        """The scenario's running baseline, or the one of the report's `metadata[baseline_by]` value."""
        key = self.baseline_group(report)
        if key not in self.baselines:
            self.baselines[key] = self.new_baseline()
        return self.baselines[key]

    def join(self, report: RLReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        score = report.score
        if score is None:
            self.skip(record_ids, "no_score")
            return
        samples = [s for s in (r.policy_sample() for r in rollouts) if s is not None]
        if not samples:
            self.skip(record_ids, "no_training_capture" if rollouts else "no_references")
            return
        advantage = self.baseline_for(report).advantage(score)
        self.add_unit(record_ids, [{**s, "advantage": advantage} for s in samples])

    def held_out_rule(self) -> str | None:
        # Ranked rollouts need an engine that scores given tokens (the embedded one).
        return "scored reports that cite one captured rollout" if self.holds_rollouts else None

    def gate_task(self, report: RLReport, rollouts: list[CitedInference]) -> dict[str, Any] | None:
        """A held-out scored rollout for the ranking gate (`reef.learning.evaluation.ranking`), compared within its
        `metadata[baseline_by]` group; None when the report cites anything but one captured rollout."""
        sample = rollouts[0].policy_sample() if len(rollouts) == 1 else None
        score = report.score
        if sample is None or score is None:
            return None
        return {
            "id": report.agent_record_id,
            "checker": "ranking",
            "prompt_ids": sample["prompt_ids"],
            "completion_ids": sample["completion_ids"],
            "score": score,
            "group": self.baseline_group(report),
        }


class RLConfig(PolicyGradientConfig):
    """`learning.recipe_config` of the `rl` recipe."""

    baseline_decay: float = Field(0.9, ge=0, lt=1, description="decay of the running baseline's moving averages")
    min_std: float = Field(0.1, gt=0, description="floor of the spread an advantage is divided by")
    baseline_by: str | None = Field(
        None, min_length=1, description="a metadata key whose value gets its own running baseline (None: one)"
    )


class RLRecipe(WeightsRecipe):
    """Single-rollout reinforcement learning from scored reports."""

    surface: ClassVar[Surface] = ON_POLICY_WEIGHTS  # learns from its recorded rollouts

    name: ClassVar[str] = "rl"
    loss_name: ClassVar[str] = "rl"
    config_model: ClassVar[type[RLConfig]] = RLConfig
    report_model: ClassVar[type[Report]] = RLReport
    recipe_config: RLConfig

    def processor(self) -> RLProcessor:
        config = self.recipe_config
        decay, min_std = config.baseline_decay, config.min_std
        return RLProcessor(
            self.settings.learning.batch_size, lambda: RunningBaseline(decay, min_std), config.baseline_by
        )


RECIPE = RLRecipe
