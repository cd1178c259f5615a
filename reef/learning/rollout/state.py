"""A rollout as it is stored in the record store (one JSON document per scenario) and shown by the API.

The document holds everything a replica or a restart needs: which release is the canary against which
incumbent, at what share, where the evidence was read up to (`cursor`, a record sequence), each arm's tallies,
and, once ended, the decision, why, and with which statistics.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any, Literal

from reef.core.views import RolloutStatistics, RolloutView
from reef.learning.rollout.assignment import ARMS, Arm
from reef.learning.rollout.sequential import Tally, difference_interval, mean_interval

RolloutState = Literal["canary", "promoted", "rolled_back"]
DecidedBy = Literal["test", "errors", "timeout", "operator"]


@dataclasses.dataclass(frozen=True, slots=True)
class ArmStats:
    """One arm's live evidence: requests served, requests that failed (5xx, timeouts), attributed report scores."""

    requests: int = 0
    errors: int = 0
    scores: Tally = Tally()

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "errors": self.errors, "reports": self.scores.n, "total": self.scores.total}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArmStats:
        return cls(int(data["requests"]), int(data["errors"]), Tally(int(data["reports"]), float(data["total"])))


@dataclasses.dataclass(frozen=True, slots=True)
class Rollout:
    """One scenario's rollout: open (`canary`) or ended (`promoted`, `rolled_back`)."""

    rollout_id: str
    scenario: str
    candidate_release_id: str
    incumbent_release_id: str | None
    share: float
    alpha: float
    started_at: float
    cursor: int  # the last record sequence whose evidence is counted
    arms: dict[str, ArmStats]
    state: RolloutState = "canary"
    decision: Literal["promote", "rollback"] | None = None
    decided_by: DecidedBy | None = None
    reason: str | None = None
    ended_at: float | None = None
    release_id: str | None = None  # what serves after the decision (the promoted release, or the incumbent)
    logged: bool = False  # the decision is in the commit log

    @classmethod
    def open(
        cls, scenario: str, candidate: str, incumbent: str | None, share: float, alpha: float, cursor: int
    ) -> Rollout:
        return cls(
            rollout_id=f"rollout_{uuid.uuid4().hex[:16]}",
            scenario=scenario,
            candidate_release_id=candidate,
            incumbent_release_id=incumbent,
            share=share,
            alpha=alpha,
            started_at=time.time(),
            cursor=cursor,
            arms={arm: ArmStats() for arm in ARMS},
        )

    @property
    def is_open(self) -> bool:
        return self.state == "canary"

    def arm(self, name: Arm) -> ArmStats:
        return self.arms.get(name, ArmStats())

    def arm_of_release(self, release_id: str | None) -> Arm:
        return "candidate" if release_id == self.candidate_release_id else "incumbent"

    def reports(self) -> int:
        return sum(stats.scores.n for stats in self.arms.values())

    def statistics(self, score_min: float, score_max: float) -> RolloutStatistics:
        """Each arm's counts, mean and interval, and the difference's interval, in score units."""
        span = score_max - score_min
        arms: dict[str, Any] = {}
        for name in ARMS:
            stats = self.arm(name)
            low, high = mean_interval(stats.scores, self.alpha / 2)
            mean = stats.scores.mean
            arms[name] = {
                "requests": stats.requests,
                "errors": stats.errors,
                "reports": stats.scores.n,
                "mean": None if mean is None else score_min + mean * span,
                "interval": [score_min + low * span, score_min + high * span],
            }
        low, high = difference_interval(self.arm("candidate").scores, self.arm("incumbent").scores, self.alpha)
        return {"arms": arms, "difference": {"interval": [low * span, high * span]}, "alpha": self.alpha}

    def view(self, score_min: float, score_max: float) -> RolloutView:
        """The rollout as `GET /reef/scenarios/{s}/rollout` shows it."""
        statistics = self.statistics(score_min, score_max)
        return {
            "state": self.state,
            "rollout_id": self.rollout_id,
            "candidate_release_id": self.candidate_release_id,
            "incumbent_release_id": self.incumbent_release_id,
            "share": self.share,
            "arms": statistics["arms"],
            "difference": statistics["difference"],
            "alpha": self.alpha,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "reason": self.reason,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "release_id": self.release_id,
        }

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["arms"] = {name: stats.to_json() for name, stats in self.arms.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rollout:
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in fields}
        values["arms"] = {name: ArmStats.from_json(stats) for name, stats in data["arms"].items()}
        return cls(**values)


NO_ROLLOUT: RolloutView = {
    "state": "none",
    "rollout_id": None,
    "candidate_release_id": None,
    "incumbent_release_id": None,
    "share": None,
    "arms": {arm: {"requests": 0, "errors": 0, "reports": 0, "mean": None, "interval": None} for arm in ARMS},
    "difference": {"interval": None},
    "decision": None,
    "reason": None,
}
