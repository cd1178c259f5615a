"""Recipes with the mistakes an author can make, each refused when `reef serve` starts."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from reef.learning.recipe_config import RecipeConfig
from reef.recipes.weights import WeightsRecipe
from tests.examples.filtered_sft import FilteredSFT


class NoLoss(FilteredSFT):
    """Forgets to name its loss (a `WeightsRecipe` trains with `loss_name`)."""

    name: ClassVar[str] = "no_loss"
    loss_name: ClassVar[str | None] = None


class UnknownLoss(FilteredSFT):
    name: ClassVar[str] = "unknown_loss"
    loss_name: ClassVar[str | None] = "filtered_sft_noloss"


class MissingLossFunction(FilteredSFT):
    name: ClassVar[str] = "missing_loss_function"
    loss_name: ClassVar[str | None] = "tests.fakes.bad_recipes:no_such_loss"


class CollidingConfig(RecipeConfig):
    learning_rate: float = Field(0.1, description="named like training.learning_rate")


class CollidingKeys(FilteredSFT):
    name: ClassVar[str] = "colliding_keys"
    config_model: ClassVar[type[RecipeConfig]] = CollidingConfig  # type: ignore[assignment]


class NotAReport:
    """Not a pydantic model."""


class MalformedReport(FilteredSFT):
    name: ClassVar[str] = "malformed_report"
    report_model = NotAReport  # type: ignore[assignment]


class Nameless(WeightsRecipe):
    loss_name: ClassVar[str | None] = "sft"


class LossWithoutItsSettings(FilteredSFT):
    """Trains with the `rl` loss but keeps FilteredSFT's config model, which declares no clip range."""

    name: ClassVar[str] = "loss_without_its_settings"
    loss_name: ClassVar[str | None] = "rl"
