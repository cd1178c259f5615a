"""The retention set: gate tasks from earlier lessons, on which a candidate may not lose what the serving release
knows.

An item is from an earlier lesson when it joined the gate before the serving release was published (`added_at`: a
held-out row keeps its report's time and its `metadata.lesson` when the report names one; a task posted through the
API keeps when it was posted and the `lesson` it may carry; a file's tasks have no time and are never in it). The set
keeps at most `evaluation.retention_items` of them, spread evenly over each lesson (items without a lesson form one)
and, within a lesson, evenly over time, so old lessons keep their share as new ones arrive. It is derived from the
gate's tasks and the serving release alone, so a restart finds the same set.

The guard is paired, with the gate's statistics: with d = candidate − current on the set's items, a candidate is
refused when −mean(d) − `evaluation.max_regression` > se(d), its loss beyond the allowed regression by more than one
standard error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from reef.core.payloads import RetentionSummary
from reef.learning.base import paired_mean_and_error
from reef.learning.evaluation.scores import paired_summary
from reef.learning.evaluation.tasks import Task
from reef.learning.report import Report


def retention_fields(report: Report, added_at: float | None) -> dict[str, Any]:
    """What a held-out row keeps for the retention set: its report's time and, when the report names one, its lesson."""
    fields: dict[str, Any] = {}
    if added_at is not None:
        fields["added_at"] = added_at
    lesson = report.metadata.get("lesson") if report.metadata is not None else None
    if isinstance(lesson, str | int) and not isinstance(lesson, bool):
        fields["lesson"] = str(lesson)
    return fields


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionSet:
    """The retention set of a gate: positions in its task list, their ids and lessons, and how many items were
    earlier than the serving release (`earlier`, of which the set keeps at most `limit`)."""

    positions: tuple[int, ...] = ()
    task_ids: tuple[str, ...] = ()
    lessons: tuple[str | None, ...] = ()
    earlier: int = 0
    limit: int = 0

    def to_json(self) -> dict[str, Any]:
        by_lesson: dict[str, int] = {}
        for lesson in self.lessons:
            if lesson is not None:
                by_lesson[lesson] = by_lesson.get(lesson, 0) + 1
        return {
            "items": len(self.positions),
            "earlier_items": self.earlier,
            "retention_items": self.limit,
            **({"lessons": by_lesson} if by_lesson else {}),
        }


def retention_set(tasks: Sequence[Task], serving_since: float | None, limit: int) -> RetentionSet:
    """At most `limit` of the `tasks` that joined the gate before `serving_since` (the serving release's time),
    stratified by lesson, then by time; empty when `limit` is 0 or nothing serves yet."""
    if limit <= 0 or serving_since is None:
        return RetentionSet(limit=max(limit, 0))
    earlier = [
        (position, task)
        for position, task in enumerate(tasks)
        if isinstance(task.extra.get("added_at"), int | float)
        and not isinstance(task.extra["added_at"], bool)
        and task.extra["added_at"] < serving_since
    ]
    earlier.sort(key=lambda item: (item[1].extra["added_at"], item[0]))
    groups: dict[str | None, list[int]] = {}
    for position, task in earlier:
        groups.setdefault(_lesson(task), []).append(position)
    shares = _shares(groups, limit)
    picked = sorted(p for group, share in zip(groups.values(), shares, strict=True) for p in _spread(group, share))
    return RetentionSet(
        positions=tuple(picked),
        task_ids=tuple(tasks[p].task_id for p in picked),
        lessons=tuple(_lesson(tasks[p]) for p in picked),
        earlier=len(earlier),
        limit=limit,
    )


def _lesson(task: Task) -> str | None:
    """The lesson a task names (`lesson`, a string or number), as a string; None when it names none."""
    lesson = task.extra.get("lesson")
    return str(lesson) if isinstance(lesson, str | int) and not isinstance(lesson, bool) else None


def _shares(groups: dict[str | None, list[int]], limit: int) -> list[int]:
    """`limit` split as evenly as the groups' sizes allow (a small group's unused share goes to the others)."""
    sizes = [len(group) for group in groups.values()]
    shares = [0] * len(sizes)
    left = min(limit, sum(sizes))
    while left > 0:
        open_groups = [i for i, size in enumerate(sizes) if shares[i] < size]
        each = max(1, left // len(open_groups))
        for i in open_groups:
            give = min(each, sizes[i] - shares[i], left)
            shares[i] += give
            left -= give
    return shares


def _spread(positions: list[int], count: int) -> list[int]:
    """`count` of `positions` (in time order) evenly spaced over them: one from the middle of each of `count` equal
    stretches of time."""
    if count >= len(positions):
        return list(positions)
    return [positions[(2 * i + 1) * len(positions) // (2 * count)] for i in range(count)]


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionCheck:
    """What the guard found: whether the candidate keeps what the serving release knows, why, and the figures."""

    refused: bool
    reason: str
    summary: RetentionSummary


def check_retention(
    candidate: Sequence[float], current: Sequence[float], retention: RetentionSet, max_regression: float
) -> RetentionCheck | None:
    """The guard on the paired scores of a whole gate (the retention set's positions index them); None when the set
    is empty or the scores do not cover it."""
    positions = retention.positions
    if not positions or len(candidate) != len(current) or positions[-1] >= len(candidate):
        return None
    kept = [candidate[p] for p in positions]
    known = [current[p] for p in positions]
    mean, error = paired_mean_and_error(kept, known)
    regression = -mean
    refused = regression - max_regression > error + 1e-9
    summary: RetentionSummary = {
        **paired_summary(kept, known),
        "regression": regression,
        "standard_error": error,
        "max_regression": max_regression,
        "refused": refused,
    }
    relation = ">" if refused else "<="
    reason = (
        f"retention: paired loss {regression:+.4f} - max_regression {max_regression:g} {relation} one standard error "
        f"{error:.4f} over {len(positions)} items from earlier lessons"
    )
    return RetentionCheck(refused, f"{reason}: refused" if refused else reason, summary)
