"""A stand-in for a server with an open rollout, for the rollout demo's user phase: routes users by the real
sticky assignment, answers right with a per-arm probability, and decides with the real sequential test."""

from __future__ import annotations

import random
from typing import Any

from reef.demo.tasks import DemoTask
from reef.learning.rollout.assignment import arm_of
from reef.learning.rollout.sequential import Tally, decide

ROLLOUT_ID = "rollout_fake"
RELEASES = {"candidate": "c" * 40, "incumbent": "i" * 40}


class FakeRolloutClient:
    def __init__(self, right_candidate: float, right_incumbent: float, share: float = 0.5, seed: int = 0) -> None:
        self.right = {"candidate": right_candidate, "incumbent": right_incumbent}
        self.share = share
        self.rng = random.Random(seed)
        self.tallies = {"candidate": Tally(), "incumbent": Tally()}
        self.served: dict[str, str] = {}  # receipt -> arm
        self.arms_of_users: dict[str, set[str]] = {}
        self.state = "canary"
        self.decided_by: str | None = None
        self.reports: int = 0  # plain scores: what real users send

    async def ask(self, task: DemoTask, user: str) -> tuple[str, str, str | None]:
        arm = arm_of(f"user:{user}", ROLLOUT_ID, self.share) if self.state == "canary" else "incumbent"
        self.arms_of_users.setdefault(user, set()).add(arm)
        receipt = f"rec_{len(self.served)}"
        self.served[receipt] = arm
        text = task.answer if self.rng.random() < self.right[arm] else "no idea"
        return text, receipt, RELEASES[arm]

    async def report(self, score: float, receipt: str) -> str:
        self.reports += 1
        arm = self.served[receipt]
        self.tallies[arm] = self.tallies[arm].add(score)
        decision = decide(self.tallies["candidate"], self.tallies["incumbent"], 0.05)
        if decision is not None and self.state == "canary":
            self.state = "promoted" if decision == "promote" else "rolled_back"
            self.decided_by = "test"
        return f"report_{receipt}"

    async def rollout(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "rollout_id": ROLLOUT_ID,
            "candidate_release_id": RELEASES["candidate"],
            "share": self.share,
            "arms": {arm: {"reports": tally.n} for arm, tally in self.tallies.items()},
            "decided_by": self.decided_by,
        }
