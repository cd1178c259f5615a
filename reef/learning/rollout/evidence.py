"""The live evidence of a rollout, read from the scenario's records in sequence order.

An inference the rollout routed (its payload's `rollout_id`) counts as a request of the arm whose release served
it. A report with a score counts for the arm that served the receipts it cites; a report citing receipts of both
arms counts for neither (its score cannot be told apart), and one citing no receipt of the rollout counts for
neither either (it speaks of traffic from before, or of pinned requests). Pure: the caller reads the records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from reef.core.records import Record
from reef.learning.rollout.assignment import Arm
from reef.learning.rollout.sequential import unit_score
from reef.learning.rollout.state import Rollout

Cited = Callable[[Sequence[str]], Mapping[str, Record]]


def arm_of_record(rollout: Rollout, record: Record) -> Arm | None:
    """The arm that served an inference of `rollout` (None: not routed by it)."""
    payload = record.payload
    if record.request_type != "inference" or payload is None or payload.get("rollout_id") != rollout.rollout_id:
        return None
    return rollout.arm_of_release(record.release_id())


def attributed_arm(rollout: Rollout, report: Record, cited: Mapping[str, Record]) -> Arm | None:
    """The one arm whose receipts `report` cites, or None (none of the rollout's, or both arms')."""
    arms = {arm_of_record(rollout, cited[ref]) for ref in report.references() if ref in cited}
    arms.discard(None)
    return arms.pop() if len(arms) == 1 else None


def count(rollout: Rollout, page: Sequence[Record], cited: Cited, score_min: float, score_max: float) -> Rollout:
    """`rollout` with the evidence of `page` (records after its cursor, ascending) added, and its cursor moved."""
    arms = dict(rollout.arms)
    references = [ref for record in page if record.request_type == "report" for ref in record.references()]
    found = cited(references) if references else {}
    for record in page:
        if record.request_type == "inference":
            arm = arm_of_record(rollout, record)
            if arm is not None:
                stats = arms[arm]
                arms[arm] = dataclasses.replace(stats, requests=stats.requests + 1)
            continue
        score = record.score()
        if score is None:
            continue
        arm = attributed_arm(rollout, record, found)
        if arm is not None:
            stats = arms[arm]
            arms[arm] = dataclasses.replace(stats, scores=stats.scores.add(unit_score(score, score_min, score_max)))
    cursor = max([rollout.cursor, *(r.sequence or 0 for r in page)])
    return dataclasses.replace(rollout, arms=arms, cursor=cursor)


def with_errors(rollout: Rollout, errors: Mapping[str, int]) -> Rollout:
    """`rollout` with each arm's failed requests as the shared counter says."""
    arms = {name: dataclasses.replace(stats, errors=int(errors.get(name, 0))) for name, stats in rollout.arms.items()}
    return dataclasses.replace(rollout, arms=arms)
