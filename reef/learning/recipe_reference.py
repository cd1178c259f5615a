"""The recipe configuration reference (`docs/reference/recipe-config.md`), generated from each built-in recipe's
`config_model`, so the page cannot drift from what `learning.recipe_config` accepts."""

from __future__ import annotations

import json
from typing import Any

from reef.learning.recipes_registry import builtin_recipes

HEADER = """# Recipe configuration

`learning.recipe_config` holds the chosen recipe's own settings (YAML `learning: {recipe_config: {...}}` or
`--learning.recipe-config '{"key": value}'`). Each built-in recipe declares a typed model: an unknown key or a
value of the wrong type or out of bounds stops `reef serve` with exit code 2 naming `learning.recipe_config.<key>`,
before the engine or the model loads. Values are taken as given: `"3"` is not a number and `1` is not `true`.
`reef serve --print-config` shows every key of the resolved configuration and where its value came from.

A `package.module:Class` recipe declares its own model as `config_model`; one that declares none gets its
`recipe_config` as a plain dict, unchecked (see [Write a recipe](../developer/write-a-recipe.md)).

This page is generated from the models (`reef.learning.recipe_reference`); a test fails when it is stale.
"""

_BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))


def recipe_config_reference() -> str:
    """The reference page, in Markdown: one section per built-in recipe, one row per configuration key."""
    sections = [HEADER]
    for name, recipe in builtin_recipes().items():
        summary = (recipe.__doc__ or "").strip().splitlines()[0] if recipe.__doc__ else ""
        sections.append(f"## `{name}`\n\n{summary} Surface: `{recipe.surface.name}`.\n")
        model = recipe.config_model
        properties = model.model_json_schema().get("properties", {}) if model is not None else {}
        if not properties:
            sections.append("Takes no configuration: any key is refused.\n")
            continue
        rows = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
        for key, schema in properties.items():
            rows.append(
                f"| `{key}` | {_type_of(schema)} | `{json.dumps(schema.get('default'))}` | {_allowed(schema)} | "
                f"{_cell(schema.get('description', ''))} |"
            )
        sections.append("\n".join(rows) + "\n")
    return "\n".join(sections)


def _type_of(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type_of(option) for option in schema["anyOf"])
    return {"null": "null", "object": "mapping"}.get(schema.get("type", ""), schema.get("type", "any"))


def _allowed(schema: dict[str, Any]) -> str:
    options = schema.get("anyOf", [schema])
    bounds = [f"{sign} {option[key]}" for option in options for key, sign in _BOUNDS if key in option]
    bounds += [f"length ≥ {option['minLength']}" for option in options if "minLength" in option]
    return ", ".join(bounds)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":  # python -m reef.learning.recipe_reference > docs/reference/recipe-config.md
    print(recipe_config_reference(), end="")
