"""A fake `TrainingBackend` for policy-gradient recipes: it keeps each job and writes a stand-in adapter."""

from __future__ import annotations

import json
from typing import Any

from reef.learning.base import TrainingBackend, TrainingJob, TrainingResult


class PolicyBackend(TrainingBackend):
    def __init__(self) -> None:
        self.jobs: list[TrainingJob] = []

    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        self.jobs.append(job)
        job.output_dir.mkdir(parents=True, exist_ok=True)
        (job.output_dir / "adapter_config.json").write_text(json.dumps({"r": 1, "jobs": len(self.jobs)}))
        return TrainingResult(job.output_dir, {"loss": [0.5]})
