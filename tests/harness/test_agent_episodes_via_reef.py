"""Claude Code, Codex and opencode bound to a real `reef serve` whose upstream is the scripted model: each agent
speaks its own dialect to Reef, Reef translates it (streamed tool calls included) to the upstream's dialect and
back, and records every request tagged `reef-episode` (from the episode's token).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from reef.core.episode_tokens import EpisodeKey
from reef.core.settings import Settings, StorageSettings
from reef.harness.binding import ModelBinding
from reef.harness.episodes import AgentEpisodes
from reef.learning.evaluation.tasks import parse_task
from reef.sandbox.bubblewrap import bwrap_available
from tests.fakes.reef_process import ReefProcess
from tests.fakes.scripted_model import ScriptedModel, start_scripted_model
from tests.harness.test_agent_episodes import CANDIDATE, MARKER, WRITE_TASK, agent_param

pytestmark = pytest.mark.e2e

UPSTREAM_PATH = {"openai": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}
CASES = [
    pytest.param(*agent_param(agent).values, upstream, marks=agent_param(agent).marks, id=f"{agent}-{upstream}")
    for agent, upstream in [
        ("claude", "openai"),
        ("claude", "responses"),
        ("codex", "openai"),
        ("codex", "anthropic"),
        ("opencode", "anthropic"),
        ("opencode", "responses"),
    ]
]


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    model = start_scripted_model()
    yield model
    model.stop()


@pytest.mark.parametrize(("agent", "upstream_api"), CASES)
async def test_an_agent_speaking_its_own_dialect_reaches_an_upstream_of_another_through_reef(
    agent, upstream_api, scripted, tmp_path
):
    flags = ["--inference.upstream-url", scripted.url, "--inference.upstream-api", upstream_api]
    reef = ReefProcess(tmp_path / "state", *flags, "--inference.upstream-model", "scripted").start()
    try:
        episodes = AgentEpisodes(agent, timeout_s=120, sandbox=bwrap_available(), temp_dir=tmp_path)
        key = EpisodeKey.for_settings(Settings(storage=StorageSettings(dir=tmp_path / "state")))
        mint = lambda episode, ttl_s: key.mint("agents", episode, ttl_s)  # noqa: E731
        binding = ModelBinding(reef.url, "agents", "scripted", episode_id="e1-task0-candidate", mint=mint)
        check = parse_task(WRITE_TASK, "task0").check
        result = await episodes.run(CANDIDATE, "Write the answer file.", binding, None, check)
        assert result.error is None, result.stderr_tail
        assert result.check is not None and result.check.passed, result.check
        assert MARKER in result.answer
        assert {r.path for r in scripted.received} == {UPSTREAM_PATH[upstream_api]}
        page = httpx.get(f"{reef.url}/reef/scenarios/agents/records", timeout=30).json()["records"]
        assert len(page) >= 2  # the tool call and the final message
        for summary in page:
            url = f"{reef.url}/reef/scenarios/agents/records/{summary['agent_record_id']}"
            record = httpx.get(url, timeout=30).json()
            assert record["payload"]["tags"] == {"reef-episode": "e1-task0-candidate"}
    finally:
        reef.stop()
