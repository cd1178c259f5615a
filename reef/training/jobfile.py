"""A training job and its result, and their JSON form between the server and a training process."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from reef.core.errors import ReefError


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingJob:
    """One training job, run outside the server process.

    `samples` are JSON-able dicts whose shape the `loss` understands (token ids, advantages, …).
    """

    base_model_path: Path
    parent_adapter_path: Path | None
    samples: list[dict[str, Any]]
    loss: str  # "sft" | "rl" | "grpo" | dotted function
    config: dict[str, Any]
    output_dir: Path


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingResult:
    """The candidate adapter directory and the job's metrics (loss per step, …)."""

    adapter_path: Path
    metrics: dict[str, Any]


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
