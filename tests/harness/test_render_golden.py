"""Golden renders per adapter: the same tree renders byte-for-byte to `tests/harness/golden/<adapter>/`.

Regenerate after an intended change with `REEF_UPDATE_GOLDEN=1 pytest tests/harness/test_render_golden.py`.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

import orjson
import pytest

from reef.harness.catalog import adapter_names, load_adapter, parse_adapter
from reef.harness.chat import chat_harness_for, system_prompt_for, system_prompt_of
from reef.harness.render import render, write_tree
from reef.harness.tree import HarnessTree
from tests.harness.sample_tree import MARKER, sample_tree

GOLDEN = Path(__file__).parent / "golden"


def golden_files(adapter: str) -> dict[str, str]:
    root = GOLDEN / adapter
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("adapter", ["chat", "pi", "claude", "codex", "opencode"])
def test_each_adapter_renders_the_sample_tree_as_its_golden_files(adapter):
    files = render(sample_tree(), adapter)
    if os.environ.get("REEF_UPDATE_GOLDEN"):
        for relative, text in files.items():
            (GOLDEN / adapter / relative).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / adapter / relative).write_text(text)
    assert files == golden_files(adapter)


def test_every_shipped_adapter_definition_is_valid():
    root = importlib.resources.files("reef.harness.adapters")
    for name in adapter_names():
        parse_adapter(orjson.loads(root.joinpath(f"{name}.json").read_bytes()))
    assert {"chat", "pi", "claude", "codex", "opencode"} <= set(adapter_names())


@pytest.mark.parametrize("adapter", ["chat", "pi", "claude", "codex", "opencode"])
def test_rendered_files_never_hold_an_endpoint_key_or_model_binding(adapter):
    text = "\n".join(render(sample_tree(), adapter).values())
    for forbidden in ("http://", "https://", "apiKey", "baseUrl", "models.json"):
        assert forbidden not in text
    assert "models.json" not in render(sample_tree(), adapter)


def test_rendering_is_pure_and_an_empty_tree_renders_nothing():
    assert render(sample_tree(), "pi") == render(sample_tree(), load_adapter("pi"))
    assert all(render(HarnessTree(), name) == {} for name in adapter_names())


def test_the_chat_system_prompt_comes_from_a_release_directory(tmp_path):
    assert system_prompt_for(tmp_path) is None
    write_tree(sample_tree(), tmp_path)
    prompt = system_prompt_for(tmp_path)
    assert prompt == system_prompt_of(sample_tree())
    assert MARKER in prompt and "Q: what is 2 + 2?" not in prompt  # a worked example is a turn, not prompt text
    assert chat_harness_for(tmp_path).example_turns == (("what is 2 + 2?", "4"),)
    assert "export default" not in prompt  # extensions are code for other agents, not prompt text
