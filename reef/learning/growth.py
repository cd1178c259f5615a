"""Growing a candidate from a batch: the recipe's `grow`, and what a weights recipe's `grow` needs to build its job.

A weights recipe builds a `TrainingJob` and runs it with `GrowContext.train(job)`, which runs it on
`settings.training.backend` in a worker thread, so the event loop keeps serving while the model trains.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reef.core.settings import Settings
from reef.learning.base import Batch, Candidate, GrowContext, Progress, Recipe, TrainingBackend

__all__ = [
    "Candidate",
    "GrowContext",
    "Progress",
    "base_model_path",
    "default_backend_factory",
    "grow",
    "parent_adapter",
]


async def grow(recipe: Recipe, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
    """Grow a candidate with the recipe's `grow`."""
    return await recipe.grow(batch, parent_dir, ctx)


def base_model_path(settings: Settings) -> Path:
    """The served base model as a Hugging Face directory (a GGUF is converted once and cached)."""
    model_path = settings.inference.model_path or "smollm2"
    if (Path(model_path).expanduser() / "config.json").exists():
        return Path(model_path).expanduser()  # already a model directory: no need to import the local engine
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path(model_path, settings.inference.model_cache_dir)


def parent_adapter(parent_dir: Path | None) -> Path | None:
    """`parent_dir` when it holds an adapter to continue training from, else None (train from the base model)."""
    if parent_dir is None:
        return None
    holds = (parent_dir / "adapter_config.json").exists() or (parent_dir / "adapter_model.safetensors").exists()
    return parent_dir if holds else None


def default_backend_factory(settings: Settings) -> Callable[[], TrainingBackend]:
    """Open `settings.training.backend` on first use (imports torch / ray only when a weights recipe trains)."""
    opened: list[TrainingBackend] = []

    def factory() -> TrainingBackend:
        if not opened:
            from reef.learning.backends import open_training_backend

            opened.append(open_training_backend(settings.training))
        return opened[0]

    return factory
