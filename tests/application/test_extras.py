"""A setting whose optional extra is not installed stops `reef serve` with exit 2, naming the extra."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from reef.application.config import ConfigError, load_settings, parse_overrides
from reef.application.extras import check_extras
from reef.cli.main import main
from reef.core.settings import Settings
from reef.learning.recipes_registry import builtin_recipes

# The recipes that train weights are those that need the engine to serve an adapter.
WEIGHTS_RECIPES = [name for name, recipe in builtin_recipes().items() if recipe.surface.weights]
OTHER_RECIPES = [name for name in builtin_recipes() if name not in WEIGHTS_RECIPES]


def _settings(*flags: str) -> Settings:
    return load_settings(None, parse_overrides(list(flags)))[0]


@pytest.fixture()
def missing(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Top-level package names that `importlib.util.find_spec` pretends are not installed."""
    absent: set[str] = set()
    real = importlib.util.find_spec

    def find_spec(name: str, package: Any = None) -> Any:
        if name.split(".")[0] in absent:
            return None
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return absent


UPSTREAM = ("--inference.upstream-url", "http://127.0.0.1:9")


@pytest.mark.parametrize("recipe", OTHER_RECIPES)
def test_an_upstream_with_a_recipe_that_trains_no_weights_needs_no_extra(missing: set[str], recipe: str) -> None:
    missing.update({"torch", "transformers", "peft", "gguf", "safetensors", "accelerate", "llguidance", "ray"})
    check_extras(_settings(*UPSTREAM, "--learning.recipe", recipe))


def test_the_embedded_model_without_torch_names_the_local_extra(missing: set[str]) -> None:
    missing.add("torch")
    with pytest.raises(ConfigError, match=r"inference\.model_path needs the \[local\] extra \(torch not installed\)"):
        check_extras(_settings("--inference.model-path", "smollm2"))


def test_the_local_backend_without_llguidance_names_the_local_extra(missing: set[str]) -> None:
    missing.add("llguidance")
    with pytest.raises(ConfigError, match=r"inference\.backend needs the \[local\] extra \(llguidance"):
        check_extras(_settings("--inference.backend", "local"))


@pytest.mark.parametrize("recipe", WEIGHTS_RECIPES)
def test_a_weights_recipe_without_peft_names_the_train_extra(missing: set[str], recipe: str) -> None:
    missing.add("peft")
    with pytest.raises(ConfigError, match=rf"learning\.recipe {recipe} needs the \[train\] extra \(peft"):
        check_extras(_settings(*UPSTREAM, "--learning.recipe", recipe))


def test_the_ray_backend_without_ray_names_the_ray_extra(missing: set[str]) -> None:
    missing.add("ray")
    with pytest.raises(ConfigError, match=r"training\.backend ray needs the \[ray\] extra"):
        check_extras(_settings(*UPSTREAM, "--training.backend", "ray"))


def test_tracing_without_opentelemetry_names_the_tracing_extra(missing: set[str]) -> None:
    missing.add("opentelemetry")
    with pytest.raises(ConfigError, match=r"observability\.otlp_endpoint needs the \[tracing\] extra"):
        check_extras(_settings(*UPSTREAM, "--observability.otlp-endpoint", "http://127.0.0.1:4318"))


def test_every_extra_installed_passes(missing: set[str]) -> None:
    check_extras(_settings("--inference.model-path", "smollm2", "--learning.recipe", "sft"))


def test_reef_serve_exits_2_naming_the_extra_before_opening_anything(
    missing: set[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing.add("torch")
    state = tmp_path / "state"
    code = main(["serve", "--inference.model-path", "smollm2", "--learning.recipe", "sft", "--storage.dir", str(state)])
    assert code == 2
    error = capsys.readouterr().err
    assert "[local]" in error and "[train]" in error
    assert not state.exists()


_CORE_PATH_PROBE = """
import sys, tempfile
from reef.application.config import load_settings, parse_overrides
from reef.cli.main import build_parser
from reef.cli.serve import build_app
import reef.cli.status, reef.cli.releases, reef.cli.training
build_parser().parse_known_args(["serve"])
for recipe in sys.argv[1:]:
    flags = ["--inference.upstream-url", "http://127.0.0.1:9", "--storage.dir", tempfile.mkdtemp(),
             "--learning.recipe", recipe]
    build_app(load_settings(None, parse_overrides(flags))[0]).app.openapi()
heavy = ("torch", "transformers", "peft", "gguf", "safetensors", "accelerate", "llguidance", "llama_cpp", "ray")
print(sorted({name.split(".")[0] for name in sys.modules} & set(heavy)))
"""


def test_serving_an_upstream_with_any_recipe_that_trains_no_weights_imports_no_extra() -> None:
    import subprocess
    import sys

    found = subprocess.run(
        [sys.executable, "-c", _CORE_PATH_PROBE, *OTHER_RECIPES], capture_output=True, text=True, timeout=300
    )
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.strip().splitlines()[-1] == "[]"
