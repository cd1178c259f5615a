"""A recipe's configuration (`learning.recipe_config`), validated once against the recipe's declared model.

A recipe declares `config_model`, a pydantic model with `extra="forbid"`: an unknown or ill-typed key is a
`BadRequest` naming `recipe_config.<key>`. A `package.module:Class` recipe that declares none gets its
`recipe_config` as a plain dict, unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from reef.core.errors import BadRequest

FIELD = "recipe_config"


class RecipeConfig(BaseModel):
    """Base of the recipes' configuration models: unknown keys are refused, values are taken as
    given (strict: no string read as a number, no number as a boolean), never infinite or NaN."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def parse_recipe_config(model: type[BaseModel] | None, raw: Mapping[str, Any]) -> BaseModel | dict[str, Any]:
    """`raw` validated by `model` (or a copy of `raw` when the recipe declares no model); BadRequest naming
    `recipe_config.<key>` for the first key it refuses."""
    if model is None:
        return dict(raw)
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(root)"
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise BadRequest(message, field=f"{FIELD}.{key}") from None


def resolved_rows(model: type[BaseModel] | None, raw: Mapping[str, Any]) -> list[tuple[str, Any, bool]]:
    """(key, resolved value, whether it was given) for every key of the resolved configuration, for
    `reef serve --print-config`; a recipe without a model shows the keys given."""
    resolved = config_dict(parse_recipe_config(model, raw))
    return [(key, value, key in raw) for key, value in resolved.items()]


def config_dict(config: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as a plain dict (every key, defaults included), as a training job's config carries it."""
    return config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config)
