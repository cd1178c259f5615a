"""`tttd-mean`: `tttd` with group mean/std advantages (GRPO's) instead of the entropic ones — the control."""

from __future__ import annotations

from typing import ClassVar

from reef.recipes.grpo import group_advantages
from reef.recipes.tttd import TTTDRecipe
from reef.recipes.tttd_grid import Advantages


class TTTDMeanRecipe(TTTDRecipe):
    """Discovery by test-time training with (r − mean) / std advantages."""

    name: ClassVar[str] = "tttd-mean"

    def advantages(self) -> Advantages:
        return group_advantages


RECIPE = TTTDMeanRecipe
