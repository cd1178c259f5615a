"""Episodes: a fresh root with the rendered tree and binding, a timeout, the trajectory, the residue check.

The mechanics run against a stand-in pi (tests/fakes/fake_pi.py); one test runs the real pi binary against
`reef serve` with SmolLM2 and checks the model's request carried the tree's marker rule.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from reef.harness.binding import ModelBinding
from reef.harness.episodes import PiEpisodes, chat_episode
from reef.harness.tree import HarnessTree, Node
from tests.fakes.prompt_engine import PromptEngine
from tests.fakes.reef_process import ReefProcess
from tests.harness.sample_tree import MARKER

BINDING = ModelBinding("http://127.0.0.1:9", "episodes", "smollm2", api_key="k", max_tokens=8)
TREE = HarnessTree.of([Node("rules", "rules", {"text": f"Always include {MARKER} in every answer."})])


def leftover_roots(directory: Path) -> list[Path]:
    return list(directory.glob("reef-episode-*"))


@pytest.mark.parametrize(
    "sandbox",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(
                shutil.which("bwrap") is None, reason="bubblewrap (apt-get install bubblewrap) is not installed"
            ),
        ),
    ],
)
async def test_an_episode_sees_the_rendered_tree_and_leaves_nothing_behind(fake_pi, tmp_path, sandbox):
    episodes = PiEpisodes(fake_pi, timeout_s=30, sandbox=sandbox, temp_dir=tmp_path)
    result = await episodes.run(TREE, "what is 2 + 2?", BINDING)
    assert result.exit_code == 0 and not result.timed_out and result.sandboxed is sandbox
    assert MARKER in result.answer
    assert [e["type"] for e in result.trajectory] == ["session", "message_end", "message_end"]
    assert result.residue == [] and leftover_roots(tmp_path) == []


async def test_a_hung_agent_is_killed_at_the_timeout(fake_pi, tmp_path):
    result = await PiEpisodes(fake_pi, timeout_s=1, sandbox=False, temp_dir=tmp_path).run(TREE, "sleep", BINDING)
    assert result.timed_out and result.residue == [] and leftover_roots(tmp_path) == []


async def test_a_child_left_running_is_reported_as_residue_and_killed(fake_pi, tmp_path):
    result = await PiEpisodes(fake_pi, timeout_s=30, sandbox=False, temp_dir=tmp_path).run(TREE, "spawn", BINDING)
    assert not result.timed_out
    assert result.residue and "outlived" in result.residue[0]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
async def test_the_sandbox_keeps_writes_outside_the_root_from_landing(fake_pi, tmp_path):
    target = tmp_path / "outside.txt"
    result = await PiEpisodes(fake_pi, timeout_s=30, sandbox=True, temp_dir=tmp_path).run(
        TREE, f"write:{target}", BINDING
    )
    assert result.exit_code == 0
    assert not target.exists()  # it landed on the sandbox's private /tmp, gone with it


async def test_parallel_episodes_are_bounded_and_each_gets_its_own_root(fake_pi, tmp_path):
    episodes = PiEpisodes(fake_pi, timeout_s=30, max_parallel=2, sandbox=False, temp_dir=tmp_path)
    results = await episodes.run_many(TREE, ["a", "b", "c"], BINDING)
    cwds = {r.trajectory[0]["cwd"] for r in results}
    assert len(cwds) == 3 and all(r.exit_code == 0 for r in results)


async def test_a_chat_episode_is_one_request_with_the_tree_as_system_prompt_and_its_examples_as_turns():
    engine = PromptEngine()
    rules = Node("r", "rules", {"text": "Be brief."})
    tree = HarnessTree.of([rules, Node("m", "memory", {"text": "Q: what is 2 + 2?\nA: 4"})])
    result = await chat_episode(engine, tree, "what is 2 + 2?", BINDING)
    assert result.answer == "4"
    ctx = engine.calls[0][1]
    assert ctx.system_prompt == "Be brief." and ctx.example_turns == (("what is 2 + 2?", "4"),)


@pytest.mark.model
@pytest.mark.skipif(not PiEpisodes.available(), reason="pi (npm i -g @mariozechner/pi-coding-agent) is not installed")
@pytest.mark.e2e
async def test_a_real_pi_episode_sends_the_rendered_agents_md_to_reef_serving_smollm2(tmp_path):
    reef = ReefProcess(tmp_path / "state", "--inference.model-path", "smollm2", "--learning.recipe", "evolve")
    reef.start(timeout_s=240)
    try:
        binding = ModelBinding(reef.url, "pi-episode", "smollm2", max_tokens=8)
        before = sorted(Path(tempfile.gettempdir()).glob("reef-episode-*"))
        result = await PiEpisodes(timeout_s=400).run(TREE, "Say hello.", binding)
        assert result.residue == []
        assert sorted(Path(tempfile.gettempdir()).glob("reef-episode-*")) == before
        page = httpx.get(f"{reef.url}/reef/scenarios/pi-episode/records", timeout=30).json()["records"]
        assert page, f"pi sent no request: {result.stderr_tail}"
        record = httpx.get(f"{reef.url}/reef/scenarios/pi-episode/records/{page[0]['agent_record_id']}").json()
        assert MARKER in json.dumps(record["payload"]["request"]["messages"])
        assert not result.timed_out, "pi did not finish within 400 s on this machine"
    finally:
        reef.stop()


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
async def test_a_sandboxed_agent_reaches_the_model_endpoint_and_nothing_else(fake_pi, tmp_path):
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4)
        writer.write(b"pong")
        await writer.drain()
        writer.close()

    model = await asyncio.start_server(answer, "127.0.0.1", 0)
    other = await asyncio.start_server(answer, "127.0.0.1", 0)
    model_port, other_port = (s.sockets[0].getsockname()[1] for s in (model, other))
    binding = ModelBinding(f"http://127.0.0.1:{model_port}", "net", "m")
    try:
        episodes = PiEpisodes(fake_pi, timeout_s=30, sandbox=True, temp_dir=tmp_path)
        result = await episodes.run(TREE, f"connect:{model_port},{other_port}", binding)
    finally:
        model.close()
        other.close()
    assert result.exit_code == 0, result.stderr_tail
    said = json.dumps(result.trajectory)
    assert f"{model_port}=pong" in said and f"{other_port}=refused" in said
