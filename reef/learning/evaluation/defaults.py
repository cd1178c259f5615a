"""The evaluator and selector a deployment judges candidates with when none is given: the recipe's own, else the
paired task evaluator and `evaluation.policy`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.base import Evaluator, Recipe, Selector
from reef.learning.evaluation.evaluator import TaskEvaluator
from reef.learning.evaluation.selectors import load_selector


def default_evaluator(
    recipe: Recipe,
    engine: Engine,
    settings: Settings,
    *,
    context_for: Callable[..., Any],
    gate_for: Callable[..., Any],
    release_dir: Callable[[str, str | None], Path | None] | None = None,
) -> Evaluator:
    """The recipe's own gate (`GatePolicy.evaluator`) if it has one, else its `agent_evaluator(gate_for,
    release_dir)` (a harness whose adapter's agent the gate runs) if that gives one, else paired tasks (a candidate
    whose surface renders a prompt is served through it)."""
    policy = recipe.gate()
    if policy.evaluator is not None:
        return policy.evaluator(engine)
    if release_dir is not None and policy.agent_evaluator is not None:
        agent = policy.agent_evaluator(gate_for, release_dir)
        if agent is not None:
            return agent
    return TaskEvaluator(
        engine,
        settings,
        context_for=context_for,
        candidate_prompt=functools.partial(recipe.surface.prompt, recipe) if recipe.surface.files else None,
        max_parallel_tasks=settings.evaluation.max_parallel_tasks,
        gate_for=gate_for,
    )


def default_selector(recipe: Recipe, settings: Settings) -> Selector:
    """The recipe's own selector (`GatePolicy.selector`) if it has one, else `evaluation.policy`."""
    return recipe.gate().selector or load_selector(settings.evaluation.policy, settings)
