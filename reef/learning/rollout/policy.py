"""When an open rollout ends, and how: at once when the canary fails clearly more often than the incumbent,
when the sequential test decides, or at its limit (reports or time) with the configured action."""

from __future__ import annotations

import dataclasses
from typing import Literal

from reef.core.settings import RolloutSettings
from reef.learning.rollout.sequential import Tally, clearly_more, decide
from reef.learning.rollout.state import DecidedBy, Rollout


@dataclasses.dataclass(frozen=True, slots=True)
class Ending:
    """How a rollout ends: its decision, what decided it, and why in words."""

    decision: Literal["promote", "rollback"]
    decided_by: DecidedBy
    reason: str


def _failures(rollout: Rollout, arm: Literal["candidate", "incumbent"]) -> Tally:
    stats = rollout.arm(arm)
    return Tally(stats.requests + stats.errors, float(stats.errors))


def ending(rollout: Rollout, settings: RolloutSettings, now: float) -> Ending | None:
    """The rollout's ending if one is due now, else None (it keeps gathering evidence)."""
    if clearly_more(_failures(rollout, "candidate"), _failures(rollout, "incumbent"), rollout.alpha):
        c, i = rollout.arm("candidate"), rollout.arm("incumbent")
        return Ending(
            "rollback",
            "errors",
            f"the canary failed {c.errors} of {c.requests + c.errors} requests, clearly more than the incumbent's "
            f"{i.errors} of {i.requests + i.errors}",
        )
    candidate, incumbent = rollout.arm("candidate").scores, rollout.arm("incumbent").scores
    decision = decide(candidate, incumbent, rollout.alpha)
    if decision is not None:
        direction = "better" if decision == "promote" else "worse"
        return Ending(
            decision,
            "test",
            f"after {candidate.n + incumbent.n} reports the canary scores {direction} than the incumbent at level "
            f"{rollout.alpha} ({candidate.n} reports on the canary, {incumbent.n} on the incumbent)",
        )
    reports = candidate.n + incumbent.n
    if reports >= settings.max_reports:
        return Ending(settings.on_timeout, "timeout", f"no decision after {reports} reports (rollout.max_reports)")
    if now - rollout.started_at >= settings.max_duration_s:
        return Ending(
            settings.on_timeout,
            "timeout",
            f"no decision after {settings.max_duration_s:g} s (rollout.max_duration_s), {reports} reports",
        )
    return None
