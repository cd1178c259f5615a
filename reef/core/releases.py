"""Releases (versions of what a scenario serves) and the learner's commit log entries."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

ReleaseOperation = Literal["creation", "training", "rollback", "promote"]
# published: serves now; pending: stored for review; kept: did not lose, the lineage's new tip (next step trains
# from it); rejected: lost (dropped, the lineage returns to the serving release); skipped: nothing was judged.
Verdict = Literal["published", "rejected", "skipped", "pending", "kept"]


@dataclasses.dataclass(frozen=True, slots=True)
class Release:
    """One release of a scenario: a commit in the release repository.

    `content_id` is the digest of the release's files; `pending` releases (review mode) are stored but not served.
    `metrics` is the step's evaluation. A release a learner step stored says what a resume needs to commit that
    step if it crashed before its commit: the records it consumed (`consumed_record_ids`; None for a release no
    step stored), the release it was trained from (`trained_from`) and, for a lineage tip, the serving release it
    grew beside (`lineage_base`).
    """

    release_id: str
    scenario: str
    parent_release_id: str | None
    content_id: str
    operation: ReleaseOperation
    step: int
    recipe: str
    metrics: dict[str, Any]
    created_at: float
    pending: bool = False
    consumed_record_ids: tuple[str, ...] | None = None
    trained_from: str | None = None
    lineage_base: str | None = None

    def shown_metrics(self) -> dict[str, Any]:
        """The metrics as users see them: the evaluation, then what the step trained from and consumed."""
        return shown_metrics(self.metrics, self.consumed_record_ids, self.trained_from, self.lineage_base)

    def to_json(self, current: bool = False) -> dict[str, Any]:
        return {
            "release_id": self.release_id,
            "scenario": self.scenario,
            "parent_release_id": self.parent_release_id,
            "content_id": self.content_id,
            "operation": self.operation,
            "step": self.step,
            "recipe": self.recipe,
            "metrics": self.shown_metrics(),
            "created_at": self.created_at,
            "pending": self.pending,
            "current": current,
        }


def shown_metrics(
    metrics: dict[str, Any],
    consumed_record_ids: Sequence[str] | None,
    trained_from: str | None,
    lineage_base: str | None,
) -> dict[str, Any]:
    """`metrics` with a learner step's release's own fields beside them: `lineage_base` (a lineage tip) or
    `trained_from`, and `consumed_record_ids`."""
    if consumed_record_ids is None:
        return dict(metrics)
    source = {"lineage_base": lineage_base} if lineage_base is not None else {"trained_from": trained_from}
    return {**metrics, **source, "consumed_record_ids": list(consumed_record_ids)}


@dataclasses.dataclass(frozen=True, slots=True)
class LineageTip:
    """The tip of a scenario's working lineage after a judged step: the kept release, or None (no lineage)."""

    release_id: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Commit:
    """One learner step in the per-scenario commit log (the commit point of the step).

    `lineage` is what a judged step left as the working lineage's tip (None: the commit judged nothing, a skipped
    step or a rollout's decision); a resume trusts the tip the last judged step names. Its JSON form shows it as
    `metrics.lineage`.
    """

    scenario: str
    step: int
    verdict: Verdict
    reason: str
    release_id: str | None
    parent_release_id: str | None
    candidate_scores: list[float]
    current_scores: list[float]
    metrics: dict[str, Any]
    consumed_record_ids: list[str]
    created_at: float
    trained_from: str | None = None  # the release (or lineage tip) the candidate was trained from
    lineage: LineageTip | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["lineage"]
        if self.lineage is not None:
            data["metrics"] = {**self.metrics, "lineage": self.lineage.release_id}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Commit:
        """The inverse of `to_json` (keys it does not know are ignored)."""
        fields = {key: value for key, value in data.items() if key in _COMMIT_FIELDS}
        metrics = dict(fields.get("metrics") or {})
        if "lineage" in metrics:
            fields["lineage"] = LineageTip(metrics.pop("lineage"))
        return cls(**{**fields, "metrics": metrics})


_COMMIT_FIELDS = frozenset(field.name for field in dataclasses.fields(Commit)) - {"lineage"}
