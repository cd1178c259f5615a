"""Growing a candidate from a batch: the recipe's own `grow`, or the default path through a training backend.

A recipe whose `grow` returns None is a weights recipe: `recipe.training_job(...)` (completed by
`recipe.prepare_job(job, ctx)`) runs on `settings.training.backend` in a worker thread, so the event loop keeps
serving while the model trains.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from reef.core.settings import Settings
from reef.learning.base import Batch, Candidate, GrowContext, Progress, Recipe, TrainingBackend

__all__ = ["Candidate", "GrowContext", "Progress", "base_model_path", "default_backend_factory", "grow"]

log = logging.getLogger(__name__)


async def grow(
    recipe: Recipe,
    batch: Batch,
    parent_dir: Path | None,
    ctx: GrowContext,
    backend_factory: Callable[[], TrainingBackend],
) -> Candidate:
    """Grow a candidate with the recipe's own `grow`, or else with the training backend."""
    grown = await recipe.grow(batch, parent_dir, ctx)
    if grown is not None:
        return grown
    backend = backend_factory()
    base_path = await asyncio.to_thread(base_model_path, ctx.settings)
    parent_adapter = parent_dir if parent_dir is not None and _holds_adapter(parent_dir) else None
    job = recipe.training_job(batch, base_path, parent_adapter, ctx.work_dir / "candidate")
    # A recipe that must resolve more inputs (a teacher release) does it here, off the event loop.
    job = await asyncio.to_thread(recipe.prepare_job, job, ctx)
    result = await asyncio.to_thread(backend.run, job, ctx.progress)
    return Candidate(Path(result.adapter_path), dict(result.metrics))


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


def _holds_adapter(directory: Path) -> bool:
    return (directory / "adapter_config.json").exists() or (directory / "adapter_model.safetensors").exists()
