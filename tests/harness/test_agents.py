"""What each coding agent's episode is given, without running it: its harness and binding inside the episode
root, in the dialect the agent speaks, with the scenario on every request (Reef tags them `reef-episode` itself, from
the episode's token)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from reef.harness.agents import AGENTS, agent_env
from reef.harness.episodes import ModelBinding
from reef.harness.tree import HarnessTree, Node

BINDING = ModelBinding("http://127.0.0.1:8080", "s", "m", api_key="episode-token", episode_id="e1-t0-candidate")
TREE = HarnessTree.of([Node("rules", "rules", {"text": "Be brief."})])


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agent_pins_an_npm_package_at_an_exact_version(name):
    agent = AGENTS[name]
    assert agent.npm and re.fullmatch(r"\d+\.\d+\.\d+", agent.version)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agents_configuration_and_home_lie_inside_the_episode_root(name, tmp_path):
    agent = AGENTS[name]
    launch = agent.launch(tmp_path, name, "task", BINDING, TREE)
    env = {**agent_env(tmp_path), **launch.env}
    assert agent.config_dir(tmp_path).is_relative_to(tmp_path)
    for key in ("HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        assert Path(env[key]).is_relative_to(tmp_path), key
    for key in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "OPENCODE_CONFIG_DIR", "PI_CODING_AGENT_DIR"):
        assert key not in env or Path(env[key]) == agent.config_dir(tmp_path)
    assert launch.command[0] == name and launch.command[-1] == "task"


def test_claude_code_speaks_anthropic_messages_to_reef_in_a_declared_sandbox(tmp_path):
    launch = AGENTS["claude"].launch(tmp_path, "claude", "task", BINDING, TREE)
    env = launch.env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080" and env["ANTHROPIC_API_KEY"] == "episode-token"
    assert env["IS_SANDBOX"] == "1" and "--dangerously-skip-permissions" in launch.command
    assert env["ANTHROPIC_CUSTOM_HEADERS"].splitlines() == ["x-reef-scenario: s"]
    assert env["ANTHROPIC_MODEL"] == env["ANTHROPIC_SMALL_FAST_MODEL"] == "m"


def test_codex_speaks_responses_to_reef_through_a_provider_in_its_config_toml(tmp_path):
    launch = AGENTS["codex"].launch(tmp_path, "codex", "task", BINDING, TREE)
    config = tomllib.loads((tmp_path / "agent" / "config.toml").read_text())
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:8080/v1" and provider["wire_api"] == "responses"
    assert provider["http_headers"] == {"x-reef-scenario": "s"}
    assert launch.env[provider["env_key"]] == "episode-token"
    assert (
        "--skip-git-repo-check" in launch.command and (tmp_path / "agent" / "config.toml").stat().st_mode & 0o077 == 0
    )


def test_opencode_gets_reef_as_a_chat_provider_beside_the_trees_own_settings(tmp_path):
    directory = AGENTS["opencode"].config_dir(tmp_path)
    directory.mkdir(parents=True)
    (directory / "opencode.json").write_text(json.dumps({"theme": "dark", "provider": {"other": {"name": "x"}}}))
    launch = AGENTS["opencode"].launch(tmp_path, "opencode", "task", BINDING, TREE)
    config = json.loads((directory / "opencode.json").read_text())
    assert config["theme"] == "dark" and set(config["provider"]) == {"other", "reef"}
    reef = config["provider"]["reef"]
    assert reef["npm"] == "@ai-sdk/openai-compatible" and reef["options"]["baseURL"] == "http://127.0.0.1:8080/v1"
    assert reef["options"]["headers"] == {"x-reef-scenario": "s"}
    assert launch.command[launch.command.index("-m") + 1] == "reef/m"
    assert launch.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"


@pytest.mark.parametrize(
    ("name", "events", "answer"),
    [
        ("claude", [{"type": "assistant"}, {"type": "result", "result": "done"}], "done"),
        ("codex", [{"type": "item.completed", "item": {"type": "agent_message", "text": "done"}}], "done"),
        ("opencode", [{"type": "text", "part": {"text": "early"}}, {"type": "text", "part": {"text": "done"}}], "done"),
        (
            "pi",
            [{"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]}}],
            "done",
        ),
    ],
)
def test_each_agents_final_answer_is_read_from_its_own_event_stream(name, events, answer):
    assert AGENTS[name].final_answer(events) == answer
    assert AGENTS[name].final_answer([]) == ""
