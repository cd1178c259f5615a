"""`reef serve` refuses a recipe its engine cannot feed, for every built-in recipe behind every engine backend."""

from __future__ import annotations

import pytest

from reef.application.capability import check_engine_capability
from reef.application.config import ConfigError
from reef.cli.main import main
from reef.core.capabilities import ENGINE_SUPPLIES, Capability
from reef.core.settings import EvaluationSettings, InferenceSettings, LearningSettings, Settings
from reef.learning.recipes_registry import builtin_recipes

WEIGHTS = [name for name, recipe in builtin_recipes().items() if Capability.SERVE_ADAPTER in recipe.surface.needs]
NO_ENGINE_NEEDS = [name for name, recipe in builtin_recipes().items() if not recipe.surface.needs]
BACKENDS = ["upstream", "local", "vllm", "sglang"]
# The least configuration each recipe accepts (the recipe is built, so its configuration is checked first).
CONFIGS = {"opd": {"teacher": "ema"}, "openclawrl": {"judge_function": "reef.demo.user:judge"}}


def settings(recipe: str, backend: str, scoring: str = "checker") -> Settings:
    return Settings(
        inference=InferenceSettings(backend=backend, upstream_url="http://127.0.0.1:9", model_path="smollm2"),
        learning=LearningSettings(recipe=recipe, recipe_config=CONFIGS.get(recipe, {})),
        evaluation=EvaluationSettings(scoring=scoring),
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("recipe", WEIGHTS)
def test_a_weights_recipe_is_refused_only_in_front_of_an_upstream_provider(recipe, backend):
    if backend == "upstream":
        with pytest.raises(ConfigError) as refused:
            check_engine_capability(settings(recipe, backend))
        assert "learning.recipe" in str(refused.value) and "inference.backend 'upstream'" in str(refused.value)
        assert "serve_adapter" in str(refused.value)
    else:
        check_engine_capability(settings(recipe, backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("recipe", NO_ENGINE_NEEDS)
def test_recording_and_harness_recipes_run_behind_every_engine(recipe, backend):
    check_engine_capability(settings(recipe, backend))


def test_every_weights_recipe_but_sft_learns_on_policy_and_needs_token_capture():
    off_policy = [name for name in WEIGHTS if Capability.TOKEN_CAPTURE not in builtin_recipes()[name].surface.needs]
    assert off_policy == ["sft"]


def test_every_built_in_recipe_either_trains_weights_or_needs_nothing_of_the_engine():
    assert sorted(WEIGHTS + NO_ENGINE_NEEDS) == sorted(builtin_recipes()) and len(WEIGHTS) >= 10


@pytest.mark.parametrize("backend", ["upstream", "vllm", "sglang"])
def test_the_likelihood_gate_is_refused_where_the_engine_cannot_score_an_answer(backend):
    with pytest.raises(ConfigError, match="score_given_tokens"):
        check_engine_capability(settings("basic", backend, scoring="likelihood"))
    check_engine_capability(settings("sft", "local", scoring="likelihood"))


def test_every_engine_class_declares_what_its_backend_supplies():
    from reef.inference.launch import LaunchedEngine
    from reef.inference.upstream import UpstreamEngine

    assert UpstreamEngine.supplies == ENGINE_SUPPLIES["upstream"] == frozenset()
    assert LaunchedEngine.supplies == ENGINE_SUPPLIES["vllm"] == ENGINE_SUPPLIES["sglang"]


def test_reef_serve_exits_2_naming_the_recipe_and_the_backend(tmp_path, capsys):
    argv = ["serve", "--learning.recipe", "sft", "--inference.upstream-url", "http://127.0.0.1:9"]
    code = main([*argv, "--storage.dir", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert code == 2
    assert "learning.recipe 'sft'" in err and "inference.backend 'upstream'" in err
    assert not (tmp_path / "state").exists()  # refused before anything was opened
