"""`basic`: record every interaction and learn nothing (a pure inference server that keeps its traffic)."""

from __future__ import annotations

from typing import ClassVar

from reef.learning.base import Processor, Recipe
from reef.learning.recipe_config import RecipeConfig
from reef.learning.surface import NO_SURFACE, Surface


class BasicConfig(RecipeConfig):
    """`basic` takes no configuration: any `learning.recipe_config` key is refused."""


class BasicRecipe(Recipe):
    """Records only: no report schema beyond the core's, no processor, no candidates."""

    name: ClassVar[str] = "basic"
    surface: ClassVar[Surface] = NO_SURFACE
    config_model: ClassVar[type[BasicConfig]] = BasicConfig

    def processor(self) -> Processor | None:
        return None


RECIPE = BasicRecipe
