"""A training job and its result as JSON, the form they take between the server and a training process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reef.core.errors import ReefError
from reef.learning.base import TrainingJob, TrainingResult


class TrainingFailed(ReefError):
    """A training job exited with an error; the message carries the tail of its log."""

    type = "training_error"


def job_to_json(job: TrainingJob) -> dict[str, Any]:
    """A JSON-able dict of `job` (paths as strings)."""
    return {
        "base_model_path": str(job.base_model_path),
        "parent_adapter_path": None if job.parent_adapter_path is None else str(job.parent_adapter_path),
        "samples": job.samples,
        "loss": job.loss,
        "config": job.config,
        "output_dir": str(job.output_dir),
    }


def job_from_json(data: dict[str, Any]) -> TrainingJob:
    """The inverse of `job_to_json`."""
    parent = data.get("parent_adapter_path")
    return TrainingJob(
        base_model_path=Path(data["base_model_path"]),
        parent_adapter_path=None if parent is None else Path(parent),
        samples=list(data["samples"]),
        loss=data["loss"],
        config=dict(data["config"]),
        output_dir=Path(data["output_dir"]),
    )


def result_to_json(result: TrainingResult) -> dict[str, Any]:
    return {"adapter_path": str(result.adapter_path), "metrics": result.metrics}


def result_from_json(data: dict[str, Any]) -> TrainingResult:
    return TrainingResult(adapter_path=Path(data["adapter_path"]), metrics=dict(data["metrics"]))
