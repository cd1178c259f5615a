"""What a scenario's learner is doing and has lately done, as its status shows it: the job in flight (its state,
step and training progress), the recent training losses, the recent errors, and the last commit's verdict.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from reef.core.releases import Commit
from reef.learning.evaluation.scores import paired_summary

log = logging.getLogger(__name__)


class StepActivity:
    """The job in flight and the recent losses and errors of one scenario's learner."""

    def __init__(self, scenario: str) -> None:
        self.scenario = scenario
        self.job: dict[str, Any] = {"state": "idle"}
        self.losses: collections.deque[float] = collections.deque(maxlen=50)
        self.errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=10)

    def begin(self, step: int, batch_id: str, samples: int, step_id: str | None) -> None:
        """A step starts growing a candidate; `step_id` names the request it answers, if any."""
        self.job = {
            "state": "growing",
            "step": step,
            "batch_id": batch_id,
            "samples": samples,
            "started_at": time.time(),
            "progress": None,
            "step_id": step_id,
        }

    def idle(self) -> None:
        """The step ended, whatever its verdict."""
        self.job = {"state": "idle"}

    def progress(self, event: dict[str, Any]) -> None:
        """A training progress event (its loss, if any, joins the recent losses)."""
        # Called from the training worker thread; plain assignments are safe enough for a status view.
        self.job["progress"] = event
        if isinstance(event.get("loss"), int | float):
            self.losses.append(float(event["loss"]))
        log.info("learner %s: %s", self.scenario, event)

    def publishing(self) -> None:
        """The judged candidate won: it is being published."""
        self.job["state"] = "publishing"

    def error(self, step: int | None, message: str) -> None:
        """Something went wrong (in `step`, if in one): kept among the recent errors."""
        self.errors.append({"at": time.time(), "step": step, "message": message})


def commit_summary(last: Commit | None) -> dict[str, Any] | None:
    """The status view of the last commit: its verdict, release and paired scores (and the retention guard's)."""
    if last is None:
        return None
    return {
        "step": last.step,
        "verdict": last.verdict,
        "reason": last.reason,
        "release_id": last.release_id,
        "candidate_scores": last.candidate_scores,
        "current_scores": last.current_scores,
        **paired_summary(last.candidate_scores, last.current_scores),
        **({"retention": last.metrics["retention"]} if "retention" in last.metrics else {}),
    }
