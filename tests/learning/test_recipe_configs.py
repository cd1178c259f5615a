"""Each recipe's configuration is a typed model: validated once, at start, before any engine or model is opened."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field

from reef.application import compose, startup
from reef.cli.main import main
from reef.core.errors import BadRequest
from reef.core.settings import LearningSettings, Settings
from reef.learning.base import Batch, Processor, Recipe
from reef.learning.recipe_config import RecipeConfig
from reef.learning.recipe_reference import recipe_config_reference
from reef.learning.recipes_registry import builtin_recipes, load_recipe
from reef.learning.surface import NO_SURFACE, Surface

ROOT = Path(__file__).resolve().parents[2]
MISSPELT = ["--inference.model-path", "smollm2", "--learning.recipe", "rl", "--learning.recipe-config"]


class PlainRecipe(Recipe):
    """A `package.module:Class` recipe that declares no configuration model."""

    name: ClassVar[str] = "plain"
    surface: ClassVar[Surface] = NO_SURFACE

    def processor(self) -> Processor | None:
        return None


class TypedConfig(RecipeConfig):
    rounds: int = Field(2, ge=1, description="rounds")


class TypedRecipe(PlainRecipe):
    """A `package.module:Class` recipe with its own configuration model."""

    config_model: ClassVar[type[BaseModel]] = TypedConfig


def settings_for(recipe: str, **recipe_config: Any) -> Settings:
    return Settings(learning=LearningSettings(recipe=recipe, recipe_config=recipe_config))


def test_there_are_sixteen_built_in_recipes_each_with_a_config_model_that_documents_every_key() -> None:
    recipes = builtin_recipes()
    assert len(recipes) == 16 and {"basic", "rl", "sdpo", "openclawrl", "tttd-mean", "meta_harness"} <= set(recipes)
    for name, recipe in recipes.items():
        model = recipe.config_model
        assert model is not None and model.model_config.get("extra") == "forbid", name
        assert all(field.description for field in model.model_fields.values()), name


@pytest.mark.parametrize("name", sorted(builtin_recipes()))
def test_an_unknown_recipe_config_key_is_refused_naming_it(name: str) -> None:
    with pytest.raises(BadRequest) as error:
        load_recipe(name, settings_for(name, no_such_key=1))
    assert error.value.field == "recipe_config.no_such_key"


def test_an_ill_typed_or_out_of_bounds_value_is_refused_naming_its_key() -> None:
    for config, key in (
        ({"group_size": "4"}, "group_size"),
        ({"clip_low": -1}, "clip_low"),
        ({"kl_coef": True}, "kl_coef"),
    ):
        with pytest.raises(BadRequest) as error:
            load_recipe("grpo", settings_for("grpo", **config))
        assert error.value.field == f"recipe_config.{key}"


def test_a_recipe_reads_its_typed_configuration_with_defaults_filled_in() -> None:
    recipe = load_recipe("grpo", settings_for("grpo", group_size=8))
    assert recipe.recipe_config == recipe.config_model(group_size=8)  # type: ignore[misc]
    job = recipe.training_job(Batch("b", [], []), Path("base"), None, Path("out"))
    assert job.recipe_config is recipe.recipe_config and job.training is recipe.settings.training


def test_a_dotted_recipe_without_a_config_model_gets_its_recipe_config_as_a_plain_dict() -> None:
    recipe = load_recipe(f"{__name__}:PlainRecipe", settings_for(f"{__name__}:PlainRecipe", anything=[1, 2]))
    assert recipe.recipe_config == {"anything": [1, 2]}
    typed = load_recipe(f"{__name__}:TypedRecipe", settings_for(f"{__name__}:TypedRecipe"))
    assert typed.recipe_config == TypedConfig(rounds=2)


def test_reef_serve_refuses_a_misspelt_recipe_key_before_the_engine_is_opened(monkeypatch, capsys, tmp_path) -> None:
    opened: list[Settings] = []
    monkeypatch.setattr(compose, "open_engine", opened.append)
    state = tmp_path / "state"

    code = main(["serve", *MISSPELT, '{"clip_hi": 0.3}', "--storage.dir", str(state)])

    assert code == 2
    assert "learning.recipe_config.clip_hi" in capsys.readouterr().err
    assert opened == [] and not state.exists()


def test_the_reef_command_exits_2_naming_the_key_and_opens_no_state(tmp_path) -> None:
    state = tmp_path / "state"
    result = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "serve", *MISSPELT, '{"clip_hi": 0.3}', "--storage.dir", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "learning.recipe_config.clip_hi" in result.stderr
    assert not state.exists()  # build_app creates it first: nothing was opened, no model was loaded


def test_startup_checks_run_in_their_documented_order(monkeypatch) -> None:
    ran: list[str] = []
    for name in ("check_recipe_config", "check_extras", "check_engine_capability", "check_sandbox_and_auth"):
        monkeypatch.setattr(startup, name, lambda settings, name=name: ran.append(name))
    startup.check_startup(Settings())
    assert ran == ["check_recipe_config", "check_extras", "check_engine_capability", "check_sandbox_and_auth"]


def test_print_config_shows_every_key_of_the_resolved_recipe_config_with_its_source(capsys) -> None:
    assert (
        main(["serve", "--print-config", "--learning.recipe", "rl", "--learning.recipe-config", '{"clip_low": 0.3}'])
        == 0
    )
    rows = {line.split("│")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.count("│") > 2}
    for key in builtin_recipes()["rl"].config_model.model_fields:  # type: ignore[union-attr]
        assert f"learning.recipe-config.{key}" in rows, key
    assert "0.3" in rows["learning.recipe-config.clip_low"] and "flag" in rows["learning.recipe-config.clip_low"]
    assert "default" in rows["learning.recipe-config.clip_high"]


def test_the_recipe_config_reference_page_is_the_one_generated_from_the_models() -> None:
    page = ROOT / "docs" / "reference" / "recipe-config.md"
    assert page.read_text() == recipe_config_reference(), "regenerate: python -m reef.learning.recipe_reference"


def test_nothing_in_reef_probes_a_recipe_evaluator_or_processor_with_getattr() -> None:
    probed = []
    for path in (ROOT / "reef").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") and node.args:
                target = ast.unparse(node.args[0]).lower()
                if any(word in target for word in ("recipe", "evaluator", "processor", "ctx")):
                    probed.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert probed == []
