"""Training backends: one job function (`job.run_training_job`), two launchers (local subprocess, Ray task).

Importing this package does not import torch; only the job (in the training process) does.
"""

from __future__ import annotations

from reef.core.settings import TrainingSettings
from reef.learning.backends.local import LocalProcessBackend
from reef.learning.backends.ray import RayBackend
from reef.learning.base import TrainingBackend
from reef.training.jobfile import TrainingFailed

__all__ = ["LocalProcessBackend", "RayBackend", "TrainingFailed", "open_training_backend"]


def open_training_backend(settings: TrainingSettings) -> TrainingBackend:
    """The backend `training.backend` names (`local` subprocess, or `ray` at `training.ray_address`)."""
    if settings.backend == "ray":
        return RayBackend(
            address=settings.ray_address,
            num_cpus=settings.ray_num_cpus,
            num_gpus=settings.ray_num_gpus,
            resources=settings.ray_resources,
        )
    return LocalProcessBackend(threads=settings.threads or None)
