"""Paired score vectors: wins and losses task by task, and the summary a commit and status report."""

from __future__ import annotations

from collections.abc import Sequence

from reef.core.payloads import PairedSummary


def wins_and_losses(candidate: Sequence[float], current: Sequence[float]) -> tuple[int, int]:
    """Tasks the candidate scores higher / lower on than the current release (the vectors are paired)."""
    pairs = list(zip(candidate, current, strict=True))
    return sum(c > k for c, k in pairs), sum(c < k for c, k in pairs)


def paired_summary(candidate: Sequence[float], current: Sequence[float]) -> PairedSummary:
    """Task count, both means, wins and losses; only the count when the vectors are empty or unpaired."""
    if not candidate or len(candidate) != len(current):
        return {"tasks": len(candidate)}
    wins, losses = wins_and_losses(candidate, current)
    return {
        "tasks": len(candidate),
        "candidate_mean": sum(candidate) / len(candidate),
        "current_mean": sum(current) / len(current),
        "wins": wins,
        "losses": losses,
    }
