"""Growing a candidate from a batch: the context a recipe gets, and the default path through a training backend.

A recipe may define `async grow(batch, parent_dir, ctx) -> (candidate_dir, metrics)` (harness recipes write a
directory of files). Recipes without one are weights recipes: their batch becomes a `TrainingJob`
(`recipe.loss_name`, `recipe.training_config()`; `recipe.prepare_job(job, ctx)` may complete it), run by
`settings.training.backend` in a worker thread, so the event loop keeps serving while the model trains.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.releases import Release
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.base import Batch, Recipe, TrainingBackend, TrainingJob, TrainingResult
from reef.releases.base import ReleaseStore
from reef.storage.base import RecordStore

log = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class GrowContext:
    """What a recipe may use while growing one candidate.

    `work_dir` is an empty directory owned by this step (deleted after it); write the candidate inside it.
    `progress(event)` reports per-step events (e.g. `{"step": 3, "loss": 1.2}`) to the log and `/reef/status`.
    `backend_factory()` opens the deployment's training backend, for a recipe whose own `grow` trains weights.
    `releases` lets a recipe read other releases (a distillation teacher); None where a caller has no store.
    """

    scenario: str
    step: int
    work_dir: Path
    settings: Settings
    engine: Engine
    records: RecordStore
    current_release: Release | None
    progress: Progress
    backend_factory: Callable[[], TrainingBackend] | None = None
    releases: ReleaseStore | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A grown candidate: the directory to publish and the metrics of its growth."""

    path: Path
    metrics: dict[str, Any]


async def grow(
    recipe: Recipe, batch: Batch, parent_dir: Path | None, ctx: GrowContext, backend_factory: Any
) -> Candidate:
    """Grow a candidate with the recipe's own `grow`, or else with the training backend."""
    custom = getattr(recipe, "grow", None)
    if custom is not None:
        return as_candidate(await custom(batch, parent_dir, ctx))
    backend: TrainingBackend = backend_factory()
    base_path = await asyncio.to_thread(base_model_path, ctx.settings)
    parent_adapter = parent_dir if parent_dir is not None and _holds_adapter(parent_dir) else None
    output_dir = ctx.work_dir / "candidate"
    make_job = getattr(recipe, "training_job", None)
    if callable(make_job):
        job = make_job(batch, base_path, parent_adapter, output_dir)
        prepare = getattr(recipe, "prepare_job", None)
        if callable(prepare):  # a recipe that must resolve more inputs (a teacher release) does it here
            job = await asyncio.to_thread(prepare, job, ctx)
    else:
        job = TrainingJob(
            base_model_path=base_path,
            parent_adapter_path=parent_adapter,
            samples=batch.samples,
            loss=getattr(recipe, "loss_name", recipe.name),
            config=_training_config(recipe),
            output_dir=output_dir,
        )
    result = await asyncio.to_thread(backend.run, job, ctx.progress)
    return as_candidate(result)


def as_candidate(grown: Any) -> Candidate:
    """Accept `(path, metrics)`, a `TrainingResult` or a `Candidate` from a recipe."""
    if isinstance(grown, Candidate):
        return grown
    if isinstance(grown, TrainingResult):
        return Candidate(Path(grown.adapter_path), dict(grown.metrics))
    path, metrics = grown
    return Candidate(Path(path), dict(metrics or {}))


def base_model_path(settings: Settings) -> Path:
    """The served base model as a Hugging Face directory (a GGUF is converted once and cached)."""
    model_path = settings.inference.model_path or "smollm2"
    if (Path(model_path).expanduser() / "config.json").exists():
        return Path(model_path).expanduser()  # already a model directory: no need to import the local engine
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path(model_path, settings.inference.model_cache_dir)


def default_backend_factory(settings: Settings) -> Callable[[], TrainingBackend]:
    """Open `settings.training.backend` on first use (imports torch / ray only when a weights recipe trains)."""
    opened: list[TrainingBackend] = []

    def factory() -> TrainingBackend:
        if not opened:
            from reef.learning.backends import open_training_backend

            opened.append(open_training_backend(settings.training))
        return opened[0]

    return factory


def _training_config(recipe: Recipe) -> dict[str, Any]:
    config = getattr(recipe, "training_config", None)
    return dict(config()) if callable(config) else {}


def _holds_adapter(directory: Path) -> bool:
    return (directory / "adapter_config.json").exists() or (directory / "adapter_model.safetensors").exists()
