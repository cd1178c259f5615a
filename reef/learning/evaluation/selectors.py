"""Selection policies: does a candidate replace the serving release, given paired per-task scores?

`score_comparison` (wins − losses > margin), `mean` (mean improves by more than margin), `significant_mean` (by
more than margin plus one standard error of the paired differences), `always`, `floor`
(publish unless the candidate's mean is below `evaluation.floor_score`: user-directed harness steps), or a
dotted `package.module:Class` implementing `Selector`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from typing import Any, ClassVar

from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.base import Selector, paired_mean_and_error
from reef.learning.evaluation.scores import wins_and_losses


def _check_paired(candidate: Sequence[float], current: Sequence[float]) -> None:
    if len(candidate) != len(current):
        raise ValueError(f"unpaired scores: {len(candidate)} candidate vs {len(current)} current")


class ScoreComparison(Selector):
    """Accept when the candidate wins more tasks than it loses, by more than `margin`."""

    def __init__(self, margin: float = 0.0) -> None:
        self.margin = margin

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        _check_paired(candidate, current)
        wins, losses = wins_and_losses(candidate, current)
        accepted = wins - losses > self.margin
        relation = ">" if accepted else "<="
        return accepted, f"wins {wins} - losses {losses} = {wins - losses} {relation} margin {self.margin:g}"


class MeanImprovement(Selector):
    """Accept when the candidate's mean score beats the current one's by more than `margin`."""

    def __init__(self, margin: float = 0.0) -> None:
        self.margin = margin

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        _check_paired(candidate, current)
        if not candidate:
            return False, "no scores to compare"
        candidate_mean = sum(candidate) / len(candidate)
        current_mean = sum(current) / len(current)
        accepted = candidate_mean - current_mean > self.margin
        relation = ">" if accepted else "<="
        return accepted, (
            f"mean {candidate_mean:.4f} vs {current_mean:.4f}: gain {candidate_mean - current_mean:+.4f} "
            f"{relation} margin {self.margin:g}"
        )


class SignificantMeanImprovement(MeanImprovement):
    """Accept when the paired differences d = candidate − current average more than one standard error above
    `margin`: mean(d) − margin > se(d). The mirror of the tie rule (`Selector.lost`), so a gain within the gate's
    own noise is a tie, kept as the lineage's tip and trained on, rather than published. Each step tries a new
    candidate on the same tasks, and under `mean` the ones that win a task or two by chance get published too;
    with partial credit on few tasks that publishes regressions as well as gains. Not for recipes that sample
    from the serving release (`sdpo`, `rl`): what is kept but not served never reaches their data, and the `sdpo`
    demo learnt less with it (README)."""

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        _check_paired(candidate, current)
        if not candidate:
            return False, "no scores to compare"
        gain, error = paired_mean_and_error(candidate, current)
        accepted = gain - self.margin > error + 1e-9  # an exact one-standard-error gain (one task won) is a tie
        relation = ">" if accepted else "<="
        return accepted, (
            f"paired gain {gain:+.4f} - margin {self.margin:g} {relation} one standard error {error:.4f} "
            f"over {len(candidate)} tasks"
        )


class Always(Selector):
    """Accept every candidate (useful for demos and for recipes that guard themselves)."""

    needs_scores: ClassVar[bool] = False

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        return True, "policy always accepts"


class Floor(Selector):
    """Accept unless the candidate's mean score is below `floor_score` (an operator asked for this change; the gate
    only guards against one that breaks the scenario)."""

    def __init__(self, floor_score: float = 0.0) -> None:
        self.floor_score = floor_score

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        _check_paired(candidate, current)
        if not candidate:
            return False, "no scores to compare"
        mean = sum(candidate) / len(candidate)
        accepted = mean >= self.floor_score
        relation = ">=" if accepted else "<"
        return accepted, f"mean {mean:.4f} {relation} floor_score {self.floor_score:g}"

    def lost(self, candidate: Sequence[float], current: Sequence[float]) -> bool:
        return True  # a directed candidate below the floor is dropped, never kept as a lineage tip


BUILTIN_POLICIES = {
    "score_comparison": ScoreComparison,
    "mean": MeanImprovement,
    "significant_mean": SignificantMeanImprovement,
    "always": Always,
    "floor": Floor,
}


def load_selector(policy: str, settings: Settings) -> Selector:
    """The selector named by `policy` (a built-in name or `package.module:Class`); raises BadRequest."""
    margin = settings.evaluation.margin
    if policy == "always":
        return Always()
    if policy == "floor":
        return Floor(settings.evaluation.floor_score)
    if policy in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[policy](margin)
    module_name, separator, attribute = policy.partition(":")
    if not separator:
        module_name, _, attribute = policy.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise BadRequest(f"unknown selection policy {policy!r}: {exc}", field="evaluation.policy")
    if not (inspect.isclass(cls) and issubclass(cls, Selector)):
        raise BadRequest(f"{policy!r} is not a Selector class", field="evaluation.policy")
    make: Any = cls
    parameters = inspect.signature(cls).parameters
    if "settings" in parameters:
        return make(settings=settings)
    if "margin" in parameters:
        return make(margin=margin)
    return make()
