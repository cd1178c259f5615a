"""A training job and its result, and their JSON form between the server and a training process.

A job carries the deployment's `TrainingSettings` and the recipe's configuration as their typed models. Its JSON
form names the recipe configuration's model by import path (`package.module:Class`), and `job_from_json` validates
both again in the training process, so a value the job cannot use fails there naming its field, and every default
is the model's own.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from reef.core.errors import ReefError
from reef.core.settings import TrainingSettings

TeacherKind = Literal["self", "ema", "model"]
RecipeConfigValue = BaseModel | dict[str, Any]  # a recipe without a config model hands its dict as given


@dataclasses.dataclass(frozen=True, slots=True)
class JobTeacher:
    """The teacher of a distillation job, resolved by the recipe: `self`, `ema`, or the model at `path`."""

    kind: TeacherKind
    path: Path | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingJob:
    """One training job, run outside the server process.

    `samples` are JSON-able dicts whose shape the `loss` understands (token ids, advantages, …); `training` is the
    deployment's training settings and `recipe_config` the recipe's validated configuration (the clip range, the
    divergence, …), which the loss reads by attribute.
    """

    base_model_path: Path
    parent_adapter_path: Path | None
    samples: list[dict[str, Any]]
    loss: str  # "sft" | "rl" | "grpo" | a distillation loss | "package.module:function"
    training: TrainingSettings
    recipe_config: RecipeConfigValue
    output_dir: Path
    teacher: JobTeacher | None = None
    # Earlier samples rehearsal replays, trained once in the job: each epoch takes the next contiguous share.
    replayed: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingResult:
    """The candidate adapter directory and the job's metrics (loss per step, …)."""

    adapter_path: Path
    metrics: dict[str, Any]


class TrainingFailed(ReefError):
    """A training job exited with an error; the message carries the tail of its log."""

    type = "training_error"


class JobConfigInvalid(ValueError):
    """A job's settings or recipe configuration does not validate in the training process; names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"the training job's {field}: {message}")
        self.field = field


def model_path(model: type[BaseModel]) -> str:
    """`package.module:Class`, the name a job's JSON gives its recipe configuration's model."""
    return f"{model.__module__}:{model.__qualname__}"


def job_to_json(job: TrainingJob) -> dict[str, Any]:
    """A JSON-able dict of `job` (paths as strings, models as their JSON and the recipe config's model path)."""
    config = job.recipe_config
    return {
        "base_model_path": str(job.base_model_path),
        "parent_adapter_path": None if job.parent_adapter_path is None else str(job.parent_adapter_path),
        "samples": job.samples,
        "replayed": job.replayed,
        "loss": job.loss,
        "training": job.training.model_dump(mode="json"),
        "recipe_config": {
            "model": model_path(type(config)) if isinstance(config, BaseModel) else None,
            "values": config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config),
        },
        "teacher": None
        if job.teacher is None
        else {"kind": job.teacher.kind, "path": None if job.teacher.path is None else str(job.teacher.path)},
        "output_dir": str(job.output_dir),
    }


def job_from_json(data: dict[str, Any]) -> TrainingJob:
    """The inverse of `job_to_json`; the settings and the recipe configuration are validated again, and
    `JobConfigInvalid` names the first field that does not fit (`training.<key>`, `recipe_config.<key>`)."""
    parent = data.get("parent_adapter_path")
    teacher = data.get("teacher")
    config = data["recipe_config"]
    return TrainingJob(
        base_model_path=Path(data["base_model_path"]),
        parent_adapter_path=None if parent is None else Path(parent),
        samples=list(data["samples"]),
        replayed=list(data.get("replayed", [])),
        loss=data["loss"],
        training=_validated("training", TrainingSettings, data["training"]),
        recipe_config=dict(config["values"])
        if config["model"] is None
        else _validated("recipe_config", _import_model(config["model"]), config["values"]),
        output_dir=Path(data["output_dir"]),
        teacher=None if teacher is None else JobTeacher(teacher["kind"], _path_or_none(teacher.get("path"))),
    )


def _validated(field: str, model: type[BaseModel], values: Any) -> Any:
    # From JSON text: a strict model takes what JSON can carry (a path as a string) as the JSON form of its type.
    try:
        return model.model_validate_json(json.dumps(values))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise JobConfigInvalid(f"{field}.{key}" if key else field, message) from None


def _import_model(path: str) -> type[BaseModel]:
    module_name, _, qualname = path.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise JobConfigInvalid("recipe_config", f"{path} is not a pydantic model")
    return found


def _path_or_none(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def result_to_json(result: TrainingResult) -> dict[str, Any]:
    return {"adapter_path": str(result.adapter_path), "metrics": result.metrics}


def result_from_json(data: dict[str, Any]) -> TrainingResult:
    return TrainingResult(adapter_path=Path(data["adapter_path"]), metrics=dict(data["metrics"]))
