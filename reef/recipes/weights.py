"""The base of the recipes that grow new weights: their training configuration, the job they hand a backend, and
`grow` as one call to `GrowContext.train`."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from reef.core.errors import BadRequest
from reef.core.learning_settings import TrainingSettings
from reef.core.settings import Settings
from reef.learning.base import Batch, Candidate, GrowContext, Recipe
from reef.learning.growth import base_model_path, parent_adapter
from reef.learning.recipe_config import RecipeConfig, config_dict
from reef.learning.surface import ON_POLICY_WEIGHTS, WEIGHTS, Surface
from reef.training.jobfile import TrainingJob
from reef.training.loss_names import BUILTIN_LOSSES, missing_settings, unknown_loss_message

__all__ = ["ON_POLICY_WEIGHTS", "WEIGHTS", "PolicyGradientConfig", "WeightsRecipe", "check_loss"]

RECIPE_FIELD = "learning.recipe"


class ClipRangeConfig(RecipeConfig):
    """The clip range of a clipped policy-gradient term (`rl`, `grpo`, `tttd`, `openclawrl`)."""

    clip_low: float = Field(0.2, ge=0, le=1, description="the importance ratio is clipped below at 1 − clip_low")
    clip_high: float = Field(0.28, ge=0, description="the importance ratio is clipped above at 1 + clip_high")


class PolicyGradientConfig(ClipRangeConfig):
    """The clipped policy-gradient loss's settings (`rl`, `grpo`, `tttd`)."""

    kl_coef: float = Field(0.0, ge=0, description="weight of the KL penalty to the base model (0: none)")


class WeightsRecipe(Recipe):
    """A recipe whose candidate is a LoRA adapter (or full weights) trained on its batches with `loss_name`.

    A subclass declares `name`, `loss_name` and `processor()`; `grow` builds the job (`training_job`: the batch's
    samples, the deployment's `training.*` settings plus the recipe's configuration) and runs it with
    `ctx.train(job)`. Recipes that learn from their own served answers declare `surface = ON_POLICY_WEIGHTS`.
    """

    surface: ClassVar[Surface] = WEIGHTS
    # The training job's loss: a built-in name (`sft`, `rl`, `grpo`, …) or `package.module:function`.
    loss_name: ClassVar[str | None] = None

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        check_loss(type(self))
        check_no_training_keys(self.config_model)

    def config(self) -> dict[str, Any]:
        """The recipe's validated configuration (`config_model`, defaults filled in) as a plain dict."""
        return config_dict(self.recipe_config)

    def training_job(
        self, batch: Batch, base_model_path: Path, parent_adapter_path: Path | None, output_dir: Path
    ) -> TrainingJob:
        """The job that grows a candidate from `batch`, continuing from the serving release's adapter if any: the
        deployment's `training` settings and this recipe's configuration travel with it, typed."""
        return TrainingJob(
            base_model_path=base_model_path,
            parent_adapter_path=parent_adapter_path,
            samples=batch.samples,
            replayed=batch.replayed,
            loss=self.loss_name or self.name,
            training=self.settings.training,
            recipe_config=self.recipe_config,
            output_dir=output_dir,
        )

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        """Train `batch` on the deployment's training backend, continuing from the parent release's adapter."""
        base = await asyncio.to_thread(base_model_path, ctx.settings)
        job = self.training_job(batch, base, parent_adapter(parent_dir), ctx.work_dir / "candidate")
        return await ctx.train(job)


def check_loss(recipe: type[WeightsRecipe]) -> None:
    """Refuse (BadRequest naming `learning.recipe`) a weights recipe whose `loss_name` is missing, not a built-in
    loss, a `package.module:function` that does not import, or a built-in loss that reads configuration fields the
    recipe's `config_model` does not declare."""
    loss = recipe.loss_name
    if loss is None:
        raise BadRequest(
            f"recipe {recipe.name!r} declares no loss_name (a built-in loss or 'package.module:function')",
            field=RECIPE_FIELD,
        )
    if loss in BUILTIN_LOSSES:
        missing = missing_settings(loss, recipe.config_model)
        if missing:
            raise BadRequest(
                f"recipe {recipe.name!r}: the loss {loss!r} reads {missing}, which its config_model does not declare "
                "(subclass the config model of the built-in recipe that uses this loss)",
                field=RECIPE_FIELD,
            )
        return
    module_name, _, function = loss.partition(":")
    if not function:
        raise BadRequest(f"recipe {recipe.name!r}: {unknown_loss_message(loss)}", field=RECIPE_FIELD)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise BadRequest(
            f"recipe {recipe.name!r}: loss {loss!r}: no module {module_name!r}", field=RECIPE_FIELD
        ) from error
    if not callable(vars(module).get(function)):
        raise BadRequest(
            f"recipe {recipe.name!r}: no function {function!r} in module {module_name!r}", field=RECIPE_FIELD
        )


def check_no_training_keys(model: type[BaseModel] | None) -> None:
    """Refuse a recipe configuration key named like a `training.*` setting: the job would take it in place of the
    deployment's setting."""
    clashes = sorted(set(model.model_fields) & set(TrainingSettings.model_fields)) if model is not None else []
    if clashes:
        raise BadRequest(
            f"recipe configuration keys {clashes} are training settings: set them as training.* (--training.*), "
            "or rename them in the recipe's config_model",
            field=RECIPE_FIELD,
        )
