"""What `GET /reef/status` answers: the deployment's recipe, learning and gate settings, and per live scenario its
serving release, its learner's state and who leads it."""

from __future__ import annotations

from typing import Any

from reef.application.scenarios import Scenarios
from reef.core.settings import Settings
from reef.core.views import StatusView
from reef.inference.base import Engine
from reef.learning.base import Recipe


def deployment_status(
    settings: Settings, recipe: Recipe, learns: bool, engine: Engine, scenarios: Scenarios
) -> StatusView:
    """Per scenario: learner step, buffered units, job state, last verdict and scores, serving release, errors."""
    replica = scenarios.replica
    entries = {}
    for name in sorted(scenarios.known):
        learner = scenarios.learners.get(name)
        entry: dict[str, Any] = {"current_release_id": engine.active_release_id(name)}
        entry.update(learner.status() if learner is not None else {"learning": False})
        leading = name in replica.leading
        entry["leader"] = leading
        entry["leader_id"] = replica.replica_id if leading else replica.known_leader(name)
        entries[name] = entry
    return {
        "replica_id": replica.replica_id,
        "recipe": recipe.name,
        "surface": recipe.surface.name,
        "learning": {
            "mode": settings.learning.mode,
            "enabled": learns,
            "batch_size": settings.learning.batch_size,
            "review": settings.learning.review,
        },
        "evaluation": {
            "policy": settings.evaluation.policy,
            "tasks": str(settings.evaluation.tasks) if settings.evaluation.tasks else None,
            "holdout_every": settings.evaluation.holdout_every,
            "holdout_min_tasks": settings.evaluation.holdout_min_tasks,
            "retention_items": settings.evaluation.retention_items,
            "max_regression": settings.evaluation.max_regression,
        },
        "scenarios": entries,
    }
