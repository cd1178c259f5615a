"""The base of the recipes that grow new weights: their training configuration and the job they hand a backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from reef.core.capabilities import Capability
from reef.learning.base import Batch, Recipe, Surface, TrainingJob

ON_POLICY_NEEDS = frozenset({Capability.SERVE_ADAPTER, Capability.TOKEN_CAPTURE})


class WeightsRecipe(Recipe):
    """A recipe whose candidate is a LoRA adapter (or full weights) trained on its batches with `loss_name`."""

    surface: ClassVar[Surface] = "weights"
    # A trained adapter must serve, or publishing it changes nothing; recipes that learn from their own rollouts
    # add `TOKEN_CAPTURE` (`ON_POLICY_NEEDS`).
    needs: ClassVar[frozenset[Capability]] = frozenset({Capability.SERVE_ADAPTER})
    loss_name: ClassVar[str]
    default_config: ClassVar[dict[str, Any]] = {}

    def config(self) -> dict[str, Any]:
        """The recipe's settings: its defaults overridden by `learning.recipe_config`."""
        return {**self.default_config, **self.settings.learning.recipe_config}

    def training_config(self) -> dict[str, Any]:
        """`TrainingJob.config`: the `training` settings plus the recipe's settings (clip range, KL, …)."""
        training = self.settings.training.model_dump(mode="json", exclude={"backend", "ray_address"})
        return {**training, **self.config()}

    def training_job(
        self, batch: Batch, base_model_path: Path, parent_adapter_path: Path | None, output_dir: Path
    ) -> TrainingJob:
        """The job that grows a candidate from `batch`, continuing from the serving release's adapter if any."""
        return TrainingJob(
            base_model_path=base_model_path,
            parent_adapter_path=parent_adapter_path,
            samples=batch.samples,
            loss=self.loss_name,
            config=self.training_config(),
            output_dir=output_dir,
        )
