"""The base of the recipes that grow new weights: their training configuration and the job they hand a backend."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from reef.core.capabilities import Capability
from reef.learning.base import Recipe, Surface
from reef.learning.recipe_config import RecipeConfig, config_dict


class ClipRangeConfig(RecipeConfig):
    """The clip range of a clipped policy-gradient term (`rl`, `grpo`, `tttd`, `openclawrl`)."""

    clip_low: float = Field(0.2, ge=0, le=1, description="the importance ratio is clipped below at 1 − clip_low")
    clip_high: float = Field(0.28, ge=0, description="the importance ratio is clipped above at 1 + clip_high")


class PolicyGradientConfig(ClipRangeConfig):
    """The clipped policy-gradient loss's settings (`rl`, `grpo`, `tttd`)."""

    kl_coef: float = Field(0.0, ge=0, description="weight of the KL penalty to the base model (0: none)")


ON_POLICY_NEEDS = frozenset({Capability.SERVE_ADAPTER, Capability.TOKEN_CAPTURE})


class WeightsRecipe(Recipe):
    """A recipe whose candidate is a LoRA adapter (or full weights) trained on its batches with `loss_name`."""

    surface: ClassVar[Surface] = "weights"
    # A trained adapter must serve, or publishing it changes nothing; recipes that learn from their own rollouts
    # add `TOKEN_CAPTURE` (`ON_POLICY_NEEDS`).
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.SERVE_ADAPTER})

    def config(self) -> dict[str, Any]:
        """The recipe's validated configuration (`config_model`, defaults filled in) as a plain dict."""
        return config_dict(self.recipe_config)
