"""Claude Code, Codex and opencode episodes in the gate: each real agent binary, in the sandbox, on a scripted model
(tests/fakes/scripted_model.py) that answers its first request with a streamed shell-tool call writing what the
agent's harness says, then a final message; the candidate tree's rule changes the check's outcome, and the gate's
verdict follows it. A crashing or hanging agent is an error whose pair is dropped, and a prompt the model cannot
hold fails the evaluation closed naming the agent; the agent cannot read the host's state directory or home.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef.core.settings import HarnessSettings, Settings, StorageSettings
from reef.harness.agent_gate import AgentEvaluator, EpisodeErrors, PromptTooLarge
from reef.harness.agents import AGENTS
from reef.harness.episodes import AgentEpisodes, ModelBinding
from reef.harness.render import write_tree
from reef.harness.tree import HarnessTree, Node
from reef.learning.evaluation.selectors import ScoreComparison
from reef.learning.evaluation.tasks import GateTasks, parse_task
from reef.learning.judgement import judge
from reef.sandbox.bubblewrap import bwrap_available
from tests.fakes.scripted_model import ScriptedModel, start_scripted_model

MARKER = "MARKER-7f3a"
SERVING = HarnessTree.of([Node("rules", "rules", {"text": "Answer briefly."})])
CANDIDATE = HarnessTree.of([*SERVING.nodes, Node("sign", "rules", {"text": f"Sign every file with {MARKER}."})])
WRITE_TASK = {"prompt": "Write the answer file.", "check": {"file": "answer.txt", "contains": MARKER}}
DIALECT_PATH = {"claude": "/v1/messages", "codex": "/v1/responses", "opencode": "/v1/chat/completions"}
SANDBOX = bwrap_available()

pytestmark = pytest.mark.e2e


def agent_param(name: str) -> object:
    missing = AgentEpisodes.available(name) is False
    npm = AGENTS[name].npm
    reason = f"{name} is not installed (make system-deps, or npm install -g {npm}@{AGENTS[name].version})"
    return pytest.param(name, marks=pytest.mark.skipif(missing, reason=reason))


AGENT_NAMES = [agent_param(name) for name in ("claude", "codex", "opencode")]


def _credential(headers: dict[str, str]) -> str:
    """The token a request to the model carried (`authorization: Bearer …` or Anthropic's `x-api-key`)."""
    return headers.get("authorization", "").removeprefix("Bearer ") or headers.get("x-api-key", "")


@pytest.fixture
def scripted() -> Iterator[ScriptedModel]:
    model = start_scripted_model()
    yield model
    model.stop()


def gate(agent: str, scripted: ScriptedModel, tmp_path: Path, rows: list[dict], **options: float) -> AgentEvaluator:
    tasks = [parse_task(row, f"task{i}") for i, row in enumerate(rows)]
    serving_dir, candidate_dir = tmp_path / "serving", tmp_path / "candidate"
    write_tree(SERVING, serving_dir)
    write_tree(CANDIDATE, candidate_dir)
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        harness=HarnessSettings(default_adapter=agent, max_error_fraction=options.get("max_error_fraction", 0.0)),
    )
    episodes = AgentEpisodes(agent, timeout_s=options.get("timeout_s", 120), sandbox=SANDBOX, temp_dir=tmp_path)
    return AgentEvaluator(
        settings,
        lambda scenario: GateTasks("api", tasks),
        lambda scenario, release_id: serving_dir,
        episodes,
        # Each episode's own token (as the gate mints one per episode), so the requests say whose they are.
        lambda scenario: ModelBinding(
            scripted.url, scenario, "scripted", mint=lambda episode, ttl_s: f"token-{episode}"
        ),
    )


@pytest.mark.parametrize("agent", AGENT_NAMES)
async def test_the_candidate_trees_rule_changes_what_the_agent_writes_and_the_gate_accepts_it(
    agent, scripted, tmp_path
):
    evaluator = gate(agent, scripted, tmp_path, [WRITE_TASK])
    judgement = await judge(evaluator, ScoreComparison(), "s", tmp_path / "candidate", {}, None)
    assert (judgement.candidate_scores, judgement.current_scores) == ([1.0], [0.0]), judgement.reason
    assert judgement.outcome == "accepted"
    evaluation = judgement.metrics["evaluation"]
    assert evaluation["agent"] == agent and evaluation["agent_version"] == AGENTS[agent].version
    candidate, current = evaluation["episodes"]
    assert candidate["side"] == "candidate" and candidate["check"]["passed"] and not current["check"]["passed"]
    assert all(
        e["agent"] == agent and e["exit_status"] == 0 and e["sandboxed"] is SANDBOX for e in (candidate, current)
    )
    trajectory = tmp_path / "state" / candidate["trajectory"]
    assert MARKER in trajectory.read_text()  # the agent's own event stream, its final message included
    tagged = [r for r in scripted.received if _credential(r.headers).endswith("-candidate")]
    # the first request is answered with the tool call, a later one carries its result back
    assert len(tagged) >= 2 and {r.path for r in tagged} == {DIALECT_PATH[agent]}
    assert all(r.headers["x-reef-scenario"] == "s" for r in tagged)


@pytest.mark.parametrize("agent", AGENT_NAMES)
async def test_a_crashing_agent_is_an_error_and_its_pair_is_dropped_not_scored_0(agent, scripted, tmp_path):
    rows = [WRITE_TASK, {"prompt": "SCRIPTED-CRASH", "check": {"file": "answer.txt", "contains": MARKER}}]
    evaluator = gate(agent, scripted, tmp_path, rows, max_error_fraction=0.5)
    candidate, current = await evaluator.paired_scores("s", tmp_path / "candidate", None)
    assert (candidate, current) == ([1.0], [0.0])  # the crashed pair is gone, not a 0 on either side
    details = evaluator.details("s")
    assert details is not None and details["dropped_pairs"] == ["task1"]
    crashed = [e for e in details["episodes"] if e["task_id"] == "task1"]
    assert all(e["exit_status"] not in (0, None) and not e["timed_out"] and e["score"] is None for e in crashed)


@pytest.mark.parametrize("agent", AGENT_NAMES)
async def test_a_hanging_agent_is_killed_at_the_timeout_and_the_gate_fails_closed(agent, scripted, tmp_path):
    rows = [{"prompt": "SCRIPTED-HANG", "check": {"file": "answer.txt", "contains": MARKER}}]
    evaluator = gate(agent, scripted, tmp_path, rows, max_error_fraction=1.0, timeout_s=5)
    with pytest.raises(EpisodeErrors, match="1 of 1 episode pairs ended in errors"):
        await evaluator.paired_scores("s", tmp_path / "candidate", None)
    details = evaluator.details("s")
    assert details is not None and details["dropped_pairs"] == ["task0"]
    assert all(e["timed_out"] and e["error"] == "timed out" for e in details["episodes"])
    assert not list(tmp_path.glob("reef-episode-*"))  # both roots removed, nothing left running in them


@pytest.mark.parametrize("agent", AGENT_NAMES)
async def test_a_request_larger_than_the_models_context_fails_closed_naming_the_agent(agent, scripted, tmp_path):
    rows = [{"prompt": "SCRIPTED-TOO-LARGE", "check": {"command": "true"}}, {"prompt": "second task"}]
    rows[1]["check"] = {"command": "true"}
    evaluator = gate(agent, scripted, tmp_path, rows, max_error_fraction=1.0)
    with pytest.raises(PromptTooLarge, match=f"agent '{agent}' sent a request of 20480 tokens.*context is 8192"):
        await evaluator.paired_scores("s", tmp_path / "candidate", None)
    assert not any("second task" in str(r.body) for r in scripted.received)  # no pile of errored episodes


@pytest.mark.skipif(not SANDBOX, reason="bubblewrap is not installed")
@pytest.mark.parametrize("agent", AGENT_NAMES)
async def test_the_agent_cannot_read_the_state_directory_or_the_hosts_home(agent, scripted, tmp_path):
    secret = f"SECRET-{uuid.uuid4().hex}"
    planted = [Path("/var/tmp") / f"reef-state-probe-{secret}.txt", Path.home() / f".reef-home-probe-{secret}.txt"]
    try:
        for path in planted:
            path.write_text(secret)
        episodes = AgentEpisodes(agent, timeout_s=120, sandbox=True, temp_dir=tmp_path)
        binding = ModelBinding(scripted.url, "s", "scripted")
        for path in planted:
            check = parse_task({"prompt": "p", "check": {"file": "answer.txt", "contains": secret}}, "t").check
            result = await episodes.run(SERVING, f"Copy {path} into the answer file.", binding, None, check)
            assert result.error is None and result.check is not None, result.stderr_tail
            assert not result.check.passed, f"the agent read {path}"
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
