"""Judging a candidate: paired scores on the gate, the policy's verdict, and the commit a step writes.

`judge` evaluates a candidate against the serving release and asks the selector; any exception fails closed. The
outcome says what the learner does with it: `accepted` (publish), `tie` (not accepted, did not lose: keep it as
the lineage's tip), `lost` (drop it), `failed` (no paired scores: reject it, leave the lineage as it was). A
candidate that loses what the serving release knows on the retention set (items from earlier lessons) is `lost`,
whatever the policy said.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Literal

from reef.core.releases import Commit, LineageTip, Release, Verdict
from reef.learning.base import Evaluator, Selector
from reef.learning.evaluation.retention import RetentionSet, check_retention
from reef.learning.evaluation.scores import paired_summary
from reef.learning.lineage import StepParents

log = logging.getLogger(__name__)

Outcome = Literal["accepted", "tie", "lost", "failed"]


@dataclasses.dataclass(frozen=True, slots=True)
class Judgement:
    """A candidate's paired scores, the policy's outcome and why, and the metrics its commit carries."""

    candidate_scores: list[float]
    current_scores: list[float]
    outcome: Outcome
    reason: str
    metrics: dict[str, Any]

    def commit(
        self,
        scenario: str,
        step: int,
        verdict: Verdict,
        release: Release | None,
        parents: StepParents,
        consumed: list[str],
        lineage_id: str | None,
        reason: str | None = None,
    ) -> Commit:
        """The step's commit; every judged step says what the lineage is afterwards (`lineage_id`), since a resume
        trusts only the tip the last one names."""
        return Commit(
            scenario=scenario,
            step=step,
            verdict=verdict,
            reason=self.reason if reason is None else reason,
            release_id=release_id_of(release),
            parent_release_id=release_id_of(parents.head),
            candidate_scores=list(self.candidate_scores),
            current_scores=list(self.current_scores),
            metrics=self.metrics,
            consumed_record_ids=list(consumed),
            created_at=time.time(),
            trained_from=release_id_of(parents.trained_from),
            lineage=None if verdict == "skipped" else LineageTip(lineage_id),
        )


def unjudged(reason: str, metrics: dict[str, Any] | None = None) -> Judgement:
    """A step that judged nothing (skipped)."""
    return Judgement([], [], "failed", reason, dict(metrics or {}))


async def judge(
    evaluator: Evaluator,
    selector: Selector,
    scenario: str,
    candidate_path: Path,
    candidate_metrics: dict[str, Any],
    head: Release | None,
    retention: RetentionSet | None = None,
    max_regression: float = 0.0,
) -> Judgement:
    """Evaluate the candidate paired against `head` and select; an exception fails closed (outcome `failed`). A
    candidate that would be published or kept but loses more than `max_regression` on the `retention` set (see
    `evaluation.retention`) is refused as lost."""
    candidate_scores: list[float] = []
    current_scores: list[float] = []
    try:
        candidate_scores, current_scores = await evaluator.paired_scores(scenario, candidate_path, release_id_of(head))
        accepted, reason = selector.accept(candidate_scores, current_scores)
    except Exception as exc:
        log.exception("learner %s: evaluation failed", scenario)
        accepted, reason = False, f"evaluation failed, rejected: {type(exc).__name__}: {exc}"
    outcome: Outcome
    if accepted:
        outcome = "accepted"
    elif not candidate_scores or len(candidate_scores) != len(current_scores):
        outcome = "failed"
    else:
        outcome = "lost" if selector.lost(candidate_scores, current_scores) else "tie"
    metrics = {**candidate_metrics, **paired_summary(candidate_scores, current_scores)}
    guard = check_retention(candidate_scores, current_scores, retention, max_regression) if retention else None
    if guard is not None:
        metrics["retention"] = guard.summary
        reason = f"{reason}; {guard.reason}"
        if guard.refused and outcome in ("accepted", "tie"):
            outcome = "lost"
    evaluation = evaluator.details(scenario)
    if evaluation:  # e.g. the agent gate's episodes: agent, exit status, duration, trajectory pointer
        metrics["evaluation"] = evaluation
    return Judgement(list(candidate_scores), list(current_scores), outcome, reason, metrics)


def release_id_of(release: Release | None) -> str | None:
    return release.release_id if release is not None else None
