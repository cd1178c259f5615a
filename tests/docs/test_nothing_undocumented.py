"""Nothing undocumented: every setting, CLI command, recipe and recipe configuration key has documentation."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import yaml

from reef.cli.main import build_parser
from reef.cli.reference import commands, settings_keys
from reef.learning import recipes_registry
from reef.learning.recipes_registry import recipe_class
from tests.docs.markdown_links import ROOT

RECIPES_DIR = ROOT / "docs/guides/recipes"
RECIPE_CONFIG_PAGE = ROOT / "docs/reference/recipe-config.md"


def builtin_recipe_names() -> list[str]:
    """Every built-in recipe: the registry's list where it has one, else each `reef/recipes` module's RECIPE."""
    builtin = getattr(recipes_registry, "builtin_recipes", None)
    if builtin is not None:
        found = builtin()
        items = found.values() if isinstance(found, dict) else found
        return sorted(item if isinstance(item, str) else item.name for item in items)
    names = []
    for path in sorted((ROOT / "reef/recipes").glob("*.py")):
        module = importlib.import_module(f"reef.recipes.{path.stem}")
        recipe = getattr(module, "RECIPE", None)
        if recipe is not None:
            names.append(recipe.name)
    return sorted(names)


def recipe_config_keys(name: str) -> set[str]:
    """The keys `learning.recipe_config` takes for recipe `name`: its typed config model's fields where it has one,
    else the keys its code reads from its configuration."""
    cls = recipe_class(name)
    model = getattr(cls, "config_model", None)
    if model is not None and hasattr(model, "model_fields"):
        return set(model.model_fields)
    keys: set[str] = set(getattr(cls, "default_config", {}) or {})
    pattern = re.compile(r"""config(?:\(\))?(?:\.get\(|\[)\s*["']([a-z_]+)["']""")
    for klass in cls.__mro__:
        module = importlib.import_module(klass.__module__)
        if module.__name__.startswith("reef.recipes") and module.__file__:
            keys |= set(pattern.findall(Path(module.__file__).read_text()))
    # Keys of harness-tree nodes, not of the recipe's configuration.
    return keys - {"tags", "helpful", "harmful"}


def test_every_setting_has_a_description() -> None:
    undocumented = [f"{section}.{key}" for section, key, field in settings_keys() if not (field.description or "")]
    assert undocumented == []


def test_every_cli_command_and_option_has_help_text() -> None:
    missing = []
    for name, parser in commands(build_parser())[1:]:
        if not (parser.description or _help_of(name)):
            missing.append(name)
        for action in parser._actions:
            if action.help is None and action.option_strings:
                missing.append(f"{name} {action.option_strings[0]}")
    assert missing == []


def _help_of(command: str) -> str | None:
    *_, leaf = command.split()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == leaf:
                    return choice.help
    return None


def test_every_cli_command_is_in_the_cli_reference() -> None:
    page = (ROOT / "docs/reference/cli.md").read_text()
    assert [name for name, _ in commands(build_parser()) if f"\n## {name}\n" not in page] == []


def test_every_builtin_recipe_has_a_page_in_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [n for n in builtin_recipe_names() if not (RECIPES_DIR / f"{n}.md").is_file()]
    missing += [n for n in builtin_recipe_names() if f"guides/recipes/{n}.md" not in nav]
    assert missing == []


def test_every_recipe_configuration_key_is_documented() -> None:
    reference = RECIPE_CONFIG_PAGE.read_text()
    undocumented = []
    for name in builtin_recipe_names():
        page = (RECIPES_DIR / f"{name}.md").read_text()
        for key in sorted(recipe_config_keys(name)):
            if f"`{key}`" not in page and f"`{key}`" not in reference:
                undocumented.append(f"{name}: {key}")
    assert undocumented == []


def test_every_page_under_docs_is_in_the_site_navigation() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, str):
            listed.add(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(nav)
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(pages - listed) == []
    assert sorted(listed - pages) == []
