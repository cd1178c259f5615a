"""The installer script: writes the rendered tree, binds the model with REEF_TOKEN, and is idempotent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reef.harness.catalog import load_adapter
from reef.harness.install import install_script
from reef.harness.mutations import Mutation, apply_mutations
from reef.harness.render import render
from tests.harness.sample_tree import MARKER, sample_tree

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")


def script_for(adapter: str, tree, release_id: str) -> str:
    return install_script(
        load_adapter(adapter),
        render(tree, adapter),
        release_id=release_id,
        scenario="demo",
        base_url="http://127.0.0.1:8900/",
        model="smollm2",
    )


def run(script: str, home: Path, token: str = "t0k'en") -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "REEF_TOKEN": token}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_pi_installer_writes_the_tree_and_the_binding_and_a_rerun_is_already_current(tmp_path):
    script = script_for("pi", sample_tree(), "rel-1")
    first = run(script, tmp_path)
    agent_dir = tmp_path / ".pi" / "agent"
    assert "installed release rel-1" in first
    assert MARKER in (agent_dir / "AGENTS.md").read_text()
    assert (agent_dir / "skills" / "adding" / "SKILL.md").exists()
    binding = json.loads((agent_dir / "models.json").read_text())["providers"]["reef"]
    assert binding == {
        "api": "openai-completions",
        "baseUrl": "http://127.0.0.1:8900/v1",
        "apiKey": "t0k'en",
        "headers": {"x-reef-scenario": "demo"},
        "models": [{"id": "smollm2"}],
    }
    assert (agent_dir / "models.json").stat().st_mode & 0o077 == 0
    second = run(script, tmp_path)
    assert "already current" in second


def test_the_token_never_appears_in_the_script():
    assert "t0k" not in script_for("pi", sample_tree(), "rel-1")


def test_a_newer_release_replaces_files_the_old_one_had(tmp_path):
    run(script_for("pi", sample_tree(), "rel-1"), tmp_path)
    smaller = apply_mutations(sample_tree(), [Mutation.remove("adding")])
    out = run(script_for("pi", smaller, "rel-2"), tmp_path)
    assert "installed release rel-2" in out
    assert not (tmp_path / ".pi" / "agent" / "skills" / "adding" / "SKILL.md").exists()


@pytest.mark.parametrize(
    ("adapter", "directory", "variable"),
    [
        ("claude", ".claude", "ANTHROPIC_BASE_URL"),
        ("codex", ".codex", "OPENAI_BASE_URL"),
        ("opencode", ".config/opencode", "OPENAI_BASE_URL"),
        ("chat", ".reef/harness", "REEF_BASE_URL"),
    ],
)
def test_other_adapters_install_their_files_and_an_env_binding(tmp_path, adapter, directory, variable):
    script = script_for(adapter, sample_tree(), "rel-1")
    run(script, tmp_path)
    root = tmp_path / directory
    for relative in render(sample_tree(), adapter):
        assert (root / relative).exists()
    sourced = subprocess.run(
        ["sh", "-c", f". '{root}/reef.env' && printf %s \"${variable}|$REEF_SCENARIO$ANTHROPIC_CUSTOM_HEADERS\""],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert sourced.startswith("http://127.0.0.1:8900")
    assert "demo" in sourced
    assert "already current" in run(script, tmp_path)
