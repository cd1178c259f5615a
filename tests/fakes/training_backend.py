"""A fake `TrainingBackend`: "training" merges the batch's demonstrations into the parent's `answers.json`.

Each sample is `{"prompt": str, "answer": str, "record_id": str}`. With `corrupt=True` it learns wrong answers
(a bad candidate); with `forget` it drops the parent's answers to those prompts (a candidate that forgets an earlier
lesson); with `fail_times=n` its first n jobs raise. `jobs` keeps every job run, so tests can check
that no record is trained twice.
"""

from __future__ import annotations

import json
from typing import Any

from reef.learning.base import TrainingBackend, TrainingJob, TrainingResult
from tests.fakes.dict_engine import ANSWERS_FILE, read_answers


class FakeTrainingBackend(TrainingBackend):
    def __init__(self, corrupt: bool = False, fail_times: int = 0, forget: frozenset[str] = frozenset()) -> None:
        self.corrupt = corrupt
        self.forget = forget
        self.fail_times = fail_times
        self.jobs: list[TrainingJob] = []

    def trained_record_ids(self) -> list[str]:
        return [sample["record_id"] for job in self.jobs for sample in job.samples]

    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        self.jobs.append(job)
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("the fake training job crashed")
        answers = {p: a for p, a in read_answers(job.parent_adapter_path).items() if p not in self.forget}
        for index, sample in enumerate([*job.samples, *job.replayed]):
            answers[sample["prompt"]] = "wrong" if self.corrupt else sample["answer"]
            if progress is not None:
                progress({"step": index + 1, "loss": 1.0 / (index + 1)})
        job.output_dir.mkdir(parents=True, exist_ok=True)
        (job.output_dir / ANSWERS_FILE).write_text(json.dumps(answers, sort_keys=True))
        (job.output_dir / "adapter_config.json").write_text(json.dumps({"r": 1}))
        return TrainingResult(job.output_dir, {"loss": [1.0 / (i + 1) for i in range(len(job.samples))]})


def timed_fake_job(job: TrainingJob) -> TrainingResult:
    """`FakeTrainingBackend`'s "training" as a job function (for `RayBackend(job_function=…)`), after sleeping
    `REEF_FAKE_JOB_S` seconds (from the environment of the node that runs it) so a test can kill the node mid-job."""
    import os
    import time

    time.sleep(float(os.environ.get("REEF_FAKE_JOB_S", "0")))
    return FakeTrainingBackend().run(job)
