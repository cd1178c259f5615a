"""The learning services: what every learner of a deployment shares, built once by the runtime and handed down."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.base import Evaluator, Recipe, Selector, TrainingBackend
from reef.learning.budget import UpstreamBudget
from reef.learning.gate import GateSources
from reef.learning.rollout.hooks import RolloutHooks
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore


@dataclasses.dataclass(frozen=True, slots=True)
class LearningServices:
    """The stores, the engine and the policies a scenario's learner, its steps and its settlement work with."""

    settings: Settings
    records: RecordStore
    releases: ReleaseStore
    commits: CommitLog
    engine: Engine  # the engine the learner calls: gate generations, proposer, judge (metered under a budget)
    recipe: Recipe
    evaluator: Evaluator
    selector: Selector
    backend_factory: Callable[[], TrainingBackend]  # opens `training.backend` on first use
    gate: GateSources
    budget: UpstreamBudget
    rollouts: RolloutHooks | None = None  # rollout mode `canary`: an accepted release opens a rollout
    learns: bool = True  # whether the recipe learns at all (it has a processor)
