"""Finding a recipe by the name `learning.recipe` gives: `reef.recipes.<name>` or `package.module:Class`.

Recipes are imported by name at run time, so the learning layer never imports `reef.recipes` statically.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.base import Recipe

_BUILTIN_NAME = re.compile(r"[a-z_][a-z0-9_-]*")


def load_recipe(name_or_dotted: str, settings: Settings) -> Recipe:
    """An instance of the recipe `name_or_dotted` (a built-in name, or `package.module:Class`) for `settings`."""
    return recipe_class(name_or_dotted)(settings)


def recipe_class(name_or_dotted: str) -> type[Recipe]:
    """The Recipe subclass `name_or_dotted` names; BadRequest(field="learning.recipe") when there is none."""
    module_name, _, attribute = name_or_dotted.partition(":")
    if not attribute:
        if not _BUILTIN_NAME.fullmatch(name_or_dotted):
            raise BadRequest(
                f"unknown recipe {name_or_dotted!r}: a built-in name or 'package.module:Class'", field="learning.recipe"
            )
        # A dash in a name (`tttd-mean`) is an underscore in its module (`reef.recipes.tttd_mean`).
        module_name, attribute = f"reef.recipes.{name_or_dotted.replace('-', '_')}", "RECIPE"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            raise BadRequest(f"no recipe module {module_name!r}", field="learning.recipe")
        raise
    found = getattr(module, attribute, None)
    if not (isinstance(found, type) and issubclass(found, Recipe)):
        raise BadRequest(f"{name_or_dotted!r} is not a Recipe class", field="learning.recipe")
    return found


def builtin_recipes() -> dict[str, type[Recipe]]:
    """Every built-in recipe by the name `learning.recipe` takes (each `reef.recipes.<module>` with a `RECIPE`)."""
    package = importlib.import_module("reef.recipes")
    found: dict[str, type[Recipe]] = {}
    for module in pkgutil.iter_modules(package.__path__):
        imported = importlib.import_module(f"reef.recipes.{module.name}")
        recipe = vars(imported).get("RECIPE")
        if isinstance(recipe, type) and issubclass(recipe, Recipe):
            found[recipe.name] = recipe
    return dict(sorted(found.items()))
