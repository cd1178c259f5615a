"""The recipe contract: eight members, opt-in objects for what only some recipes need, and no probing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reef.learning.base import Extensions, GatePolicy, Recipe
from reef.learning.recipes_registry import builtin_recipes, check_declarations
from reef.learning.report import Report
from reef.learning.surface import Surface

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = {"name", "surface", "processor", "grow", "config_model", "report_model", "gate", "extensions"}


def test_a_recipe_author_meets_eight_members() -> None:
    declared = {key for key in vars(Recipe) if not key.startswith("_")} | set(Recipe.__annotations__)
    assert declared == CONTRACT


@pytest.mark.parametrize("name", sorted(builtin_recipes()))
def test_every_builtin_recipe_declares_the_contract_with_typed_objects(name: str) -> None:
    recipe = builtin_recipes()[name]
    check_declarations(recipe)
    assert isinstance(recipe.surface, Surface) and issubclass(recipe.report_model, Report)
    assert {key for key in vars(recipe) if not key.startswith("_")}.isdisjoint(
        {"validate_report", "report_schema", "serving_prompt", "needs", "evaluator", "selector", "feedback_source"}
    )


def test_the_opt_in_objects_default_to_the_deployments_gate_and_no_extensions(tmp_path) -> None:
    policy, extensions = GatePolicy(), Extensions()
    assert (policy.evaluator, policy.selector, policy.takes_instructions) == (None, None, False)
    assert extensions.search is None and extensions.feedback_source("s") is None
    extensions.seed(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _calls(name: str) -> list[str]:
    found = []
    for path in (ROOT / "reef").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_nothing_in_reef_asks_an_object_which_protocol_selector_or_engine_wrapper_it_is() -> None:
    probes = ("SearchRecipe", "Always", "MeteredEngine", "Protocol")
    assert [call for call in _calls("isinstance") if any(probe in call for probe in probes)] == []


def test_nothing_in_reef_builds_a_processor_to_learn_whether_a_recipe_learns() -> None:
    probed = []
    for path in (ROOT / "reef").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and "processor()" in ast.unparse(node.left):
                probed.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert probed == []


def test_no_control_data_rides_in_a_candidates_metrics() -> None:
    readers = [
        f"{path.relative_to(ROOT)}"
        for path in (ROOT / "reef" / "learning").rglob("*.py")
        if 'metrics.get("needs_review")' in path.read_text() or "metrics['needs_review']" in path.read_text()
    ]
    assert readers == []
