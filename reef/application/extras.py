"""Which optional extras a configuration needs, checked before anything heavy is imported.

The core install (`pip install reef`) serves in front of an upstream, records, takes reports, keeps releases and
runs harness recipes. The rest comes with extras: `reef[local]` (the embedded engine: torch, transformers, peft,
gguf, safetensors, accelerate, llguidance), `reef[train]` (weight training; includes `[local]`), `reef[ray]`
(`training.backend: ray`) and `reef[tracing]` (OpenTelemetry). A setting whose extra is missing stops `reef serve`
with the key and the `pip install` line, instead of an ImportError deep inside a request or a learner step.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from reef.application.config import ConfigError
from reef.core.settings import Settings
from reef.learning.recipes_registry import recipe_class


@dataclass(frozen=True)
class Extra:
    """An optional extra of the `reef` package and the modules that show it is installed."""

    name: str
    modules: tuple[str, ...]

    def missing(self) -> list[str]:
        """The modules of this extra that cannot be imported here."""
        return [module for module in self.modules if not _importable(module)]


LOCAL = Extra("local", ("torch", "transformers", "peft", "gguf", "safetensors", "accelerate", "llguidance"))
TRAIN = Extra("train", LOCAL.modules)
RAY = Extra("ray", ("ray",))
TRACING = Extra("tracing", ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a module without a spec
        return False


def required_extras(settings: Settings) -> list[tuple[str, Extra]]:
    """Each (setting that needs it, extra) for `settings`, in the order `reef serve` reports them."""
    needed: list[tuple[str, Extra]] = []
    if settings.inference.resolved_backend() == "local":
        key = "inference.model_path" if settings.inference.model_path else "inference.backend"
        needed.append((key, LOCAL))
    if recipe_class(settings.learning.recipe).surface.weights:
        needed.append((f"learning.recipe {settings.learning.recipe}", TRAIN))
    if settings.training.backend == "ray":
        needed.append(("training.backend ray", RAY))
    if settings.observability.otlp_endpoint:
        needed.append(("observability.otlp_endpoint", TRACING))
    return needed


def check_extras(settings: Settings) -> None:
    """ConfigError naming each setting whose extra is not installed and the `pip install` that adds it."""
    problems = []
    for key, extra in required_extras(settings):
        missing = extra.missing()
        if missing:
            problems.append(
                f"{key} needs the [{extra.name}] extra ({', '.join(missing)} not installed): "
                f"pip install 'reef[{extra.name}]' (see docs/getting-started/install.md)"
            )
    if problems:
        raise ConfigError("; ".join(problems))
