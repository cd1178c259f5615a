"""`grpo`: learn from groups of rollouts of the same task, each scored; advantages are relative within a group.

A report joins the group named by `metadata.group` (or the cited inference's request tag `group`,
sent as `x-reef-tag-group`). When `group_size` (k, default 4) members have arrived the group is complete:

    A_i = (r_i − mean(r)) / (std(r) + eps)        (groups whose rewards are all equal carry no signal: dropped)

Loss: the same clipped surrogate as `rl` (`reef.training.losses.clipped_policy_loss`) against the
recorded rollout log-probs. A batch holds max(1, batch_size // k) groups.

Every well-formed report is accepted; one that cannot join a group is stored and skipped, counted by reason:
`no_score`, `no_references`, `no_training_capture`, `no_group`.
"""

from __future__ import annotations

import statistics
from typing import ClassVar

from pydantic import Field, StrictInt, StrictStr

from reef.core.payloads import PolicySample
from reef.learning.report import Metadata, Report
from reef.learning.surface import Surface
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.weights import ON_POLICY_WEIGHTS, PolicyGradientConfig, WeightsRecipe


def group_advantages(scores: list[float], eps: float = 1e-6) -> list[float] | None:
    """(r − mean) / (std + eps) for each score (population std); None when all scores are equal."""
    spread = statistics.pstdev(scores)
    if spread <= 1e-12:
        return None
    mean = statistics.fmean(scores)
    return [(score - mean) / (spread + eps) for score in scores]


class GroupMetadata(Metadata):
    """The `metadata` a `grpo` report may carry."""

    group: StrictStr | StrictInt | None = Field(
        None, description="the group it belongs to (else the cited inference's `group` tag)"
    )


class GRPOReport(Report):
    """grpo trains from scored reports on captured rollouts, in groups (metadata.group or the cited inference's group
    tag); any other well-formed report is stored and skipped (no_score, no_references, no_training_capture,
    no_group)."""

    metadata: GroupMetadata | None = Field(None, description="recipe-specific fields")


class GRPOProcessor(ReportJoiningProcessor[GRPOReport]):
    """Collects scored rollouts by group; a complete group with varied rewards becomes one unit."""

    def __init__(self, units_per_batch: int, group_size: int) -> None:
        super().__init__(units_per_batch, GRPOReport)
        self.group_size = group_size
        self._groups: dict[str, list[tuple[list[str], PolicySample, float]]] = {}

    def join(self, report: GRPOReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        score = report.score
        if score is None:
            self.skip(record_ids, "no_score")
            return
        usable = [(r, s) for r, s in ((r, r.policy_sample()) for r in rollouts) if s is not None]
        if not usable:
            self.skip(record_ids, "no_training_capture" if rollouts else "no_references")
            return
        rollout, sample = usable[0]
        group = (report.metadata.group if report.metadata else None) or rollout.tags.get("group")
        if group is None:
            self.skip(record_ids, "no_group")
            return
        members = self._groups.setdefault(str(group), [])
        members.append((record_ids, sample, score))
        if len(members) < self.group_size:
            return
        del self._groups[str(group)]
        group_ids = [i for ids, _, _ in members for i in ids]
        advantages = group_advantages([score for _, _, score in members])
        if advantages is None:
            self.skip(group_ids, "constant_group")
            return
        self.add_unit(group_ids, [{**s, "advantage": a} for (_, s, _), a in zip(members, advantages, strict=True)])

    def waiting_groups(self) -> int:
        """Groups still short of `group_size` members."""
        return len(self._groups)


class GRPOConfig(PolicyGradientConfig):
    """`learning.recipe_config` of the `grpo` recipe."""

    group_size: int = Field(4, ge=1, description="rollouts per group; advantages are normalized within a group")


class GRPORecipe(WeightsRecipe):
    """Group-relative policy optimization over rollouts reported in groups."""

    surface: ClassVar[Surface] = ON_POLICY_WEIGHTS  # learns from its recorded rollouts

    name: ClassVar[str] = "grpo"
    loss_name: ClassVar[str] = "grpo"
    config_model: ClassVar[type[GRPOConfig]] = GRPOConfig
    report_model: ClassVar[type[Report]] = GRPOReport
    recipe_config: GRPOConfig

    def processor(self) -> GRPOProcessor:
        group_size = self.recipe_config.group_size
        return GRPOProcessor(max(1, self.settings.learning.batch_size // group_size), group_size)


RECIPE = GRPORecipe
