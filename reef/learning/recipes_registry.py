"""Finding a recipe by the name `learning.recipe` gives: `reef.recipes.<name>` or `package.module:Class`.

Recipes are imported by name at run time, so the learning layer never imports `reef.recipes` statically.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from pydantic import PydanticUserError

from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.base import Recipe
from reef.learning.report import Report
from reef.learning.surface import Surface

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
    found = vars(module).get(attribute)
    if found is None:
        raise BadRequest(f"no class {attribute!r} in module {module_name!r}", field="learning.recipe")
    if not (isinstance(found, type) and issubclass(found, Recipe)):
        raise BadRequest(
            f"{name_or_dotted!r} is not a Recipe class (subclass reef.learning.base.Recipe, or WeightsRecipe)",
            field="learning.recipe",
        )
    check_declarations(found)
    return found


def check_declarations(recipe: type[Recipe]) -> None:
    """Refuse (BadRequest naming `learning.recipe`) a recipe class that declares no `name` or `surface`, or whose
    `report_model` is not a `Report` model with a JSON Schema, before anything is built from it."""
    declared = {"name": str, "surface": Surface}
    for member, kind in declared.items():
        if not isinstance(vars_of(recipe).get(member), kind):
            raise BadRequest(f"recipe class {recipe.__qualname__} declares no {member}", field="learning.recipe")
    model = recipe.report_model
    if not (isinstance(model, type) and issubclass(model, Report)):
        raise BadRequest(
            f"recipe {recipe.name!r}: report_model must subclass reef.learning.report.Report", field="learning.recipe"
        )
    try:
        model.model_json_schema()
    except PydanticUserError as error:  # a field type pydantic cannot describe, an unresolved annotation
        raise BadRequest(
            f"recipe {recipe.name!r}: report_model {model.__name__} is malformed: {error}", field="learning.recipe"
        ) from None


def vars_of(recipe: type[Recipe]) -> dict[str, object]:
    """The class members `recipe` and its bases declare (the nearest wins)."""
    members: dict[str, object] = {}
    for cls in reversed(recipe.__mro__):
        members.update(vars(cls))
    return members


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
