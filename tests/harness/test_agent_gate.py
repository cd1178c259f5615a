"""The agent gate: paired episodes (candidate tree vs serving tree) of a stand-in pi (tests/fakes/fake_pi.py) on
agent tasks with a workspace and a check; an episode that times out or fails is an error, never a 0."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reef.core.errors import BadRequest
from reef.core.settings import HarnessSettings, Settings, StorageSettings
from reef.harness.agent_gate import AgentEvaluator, EpisodeErrors, PromptTooLarge
from reef.harness.episodes import ModelBinding, PiEpisodes
from reef.harness.render import write_tree
from reef.harness.tree import HarnessTree, Node
from reef.learning.evaluation.tasks import GateTasks, parse_task

MARKER = "MARKER-7f3a"
SERVING = HarnessTree.of([Node("rules", "rules", {"text": "Answer briefly."})])
CANDIDATE = HarnessTree.of([*SERVING.nodes, Node("marker", "rules", {"text": f"Say {MARKER}."})])


def gate(tmp_path: Path, fake_pi: str, rows: list[dict], max_error_fraction: float = 0.5) -> AgentEvaluator:
    tasks = [parse_task(row, f"task{i}") for i, row in enumerate(rows)]
    serving_dir, candidate_dir = tmp_path / "serving", tmp_path / "candidate"
    write_tree(SERVING, serving_dir)
    write_tree(CANDIDATE, candidate_dir)
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        harness=HarnessSettings(default_adapter="pi", max_error_fraction=max_error_fraction),
    )
    episodes = PiEpisodes(fake_pi, timeout_s=2, sandbox=False, temp_dir=tmp_path)
    return AgentEvaluator(
        settings,
        lambda scenario: GateTasks("api", tasks),
        lambda scenario, release_id: serving_dir,
        episodes,
        lambda scenario: ModelBinding("http://127.0.0.1:9", scenario, "m"),
    )


async def test_episode_pairs_score_each_tree_by_its_check_and_the_commit_gets_every_episode(tmp_path, fake_pi):
    rows = [
        {"prompt": "copy-agents:out.txt", "check": {"file": "out.txt", "contains": MARKER}},
        {
            "prompt": "copy-agents:out.txt",
            "workspace": {"files": {"src/input.txt": "data"}},
            "check": {"command": ["sh", "-c", f"grep -q {MARKER} out.txt && test -f src/input.txt"]},
        },
        {"prompt": "hello", "check": {"command": "test -f notes.md"}, "workspace": {"files": {"notes.md": "x"}}},
    ]
    evaluator = gate(tmp_path, fake_pi, rows)
    candidate, current = await evaluator.paired_scores("s", tmp_path / "candidate", "rel_serving")
    assert candidate == [1.0, 1.0, 1.0] and current == [0.0, 0.0, 1.0]
    details = evaluator.details("s")
    assert details is not None and details["dropped_pairs"] == []
    episodes = details["episodes"]
    assert [(e["task_id"], e["side"]) for e in episodes][:2] == [("task0", "candidate"), ("task0", "current")]
    assert all(e["agent"] == "pi" and e["exit_status"] == 0 and e["duration_s"] >= 0 for e in episodes)
    trajectory = tmp_path / "state" / episodes[0]["trajectory"]
    assert trajectory.is_file() and "message_end" in trajectory.read_text()


async def test_an_episode_that_times_out_is_an_error_and_its_pair_is_dropped_not_scored_0(tmp_path, fake_pi):
    rows = [
        {"prompt": "copy-agents:out.txt", "check": {"file": "out.txt", "contains": MARKER}},
        {"prompt": "sleep", "check": {"file": "out.txt", "contains": MARKER}},
    ]
    evaluator = gate(tmp_path, fake_pi, rows)
    candidate, current = await evaluator.paired_scores("s", tmp_path / "candidate", "rel_serving")
    assert (candidate, current) == ([1.0], [0.0])  # the hung pair is gone, not a 0 on either side
    details = evaluator.details("s")
    assert details is not None and details["dropped_pairs"] == ["task1"]
    hung = [e for e in details["episodes"] if e["task_id"] == "task1"]
    assert all(e["timed_out"] and e["error"] == "timed out" and e["score"] is None for e in hung)


async def test_too_many_errors_fail_closed(tmp_path, fake_pi):
    rows = [{"prompt": "fail", "check": {"command": "true"}}, {"prompt": "hello", "check": {"command": "true"}}]
    evaluator = gate(tmp_path, fake_pi, rows, max_error_fraction=0.25)
    with pytest.raises(EpisodeErrors, match="1 of 2 episode pairs"):
        await evaluator.paired_scores("s", tmp_path / "candidate", "rel_serving")
    details = evaluator.details("s")
    assert details is not None and {e["exit_status"] for e in details["episodes"] if e["task_id"] == "task0"} == {3}


@pytest.mark.parametrize(
    "refusal",
    [
        "the prompt has 20480 tokens; the model's context is 8192",
        "This model's maximum context length is 8192 tokens. However, you requested 20480 tokens (20400 in the "
        "messages, 80 in the completion).",
    ],
)
async def test_a_prompt_the_model_cannot_hold_fails_closed_naming_the_agent_and_both_sizes(tmp_path, fake_pi, refusal):
    rows = [{"prompt": f"refused:{refusal}", "check": {"command": "true"}}, {"prompt": "hello", "check": {}}]
    rows[1]["check"] = {"command": "true"}
    evaluator = gate(tmp_path, fake_pi, rows, max_error_fraction=1.0)
    with pytest.raises(PromptTooLarge) as refused:
        await evaluator.paired_scores("s", tmp_path / "candidate", "rel_serving")
    assert "agent 'pi' sent a request of 20480 tokens; the serving model's context is 8192" in str(refused.value)
    assert evaluator.details("s") is None  # the first pair showed it: the other tasks never ran


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"prompt": "p", "check": {"command": 42}}, "t.check.command"),
        ({"prompt": "p", "check": {"command": ["ls", 1]}}, "t.check.command"),
        ({"prompt": "p", "check": {"file": "../etc/passwd", "contains": "x"}}, "t.check.file"),
        ({"prompt": "p", "check": {"command": "true"}, "workspace": {"files": {"../x": "y"}}}, "t.workspace.files"),
        ({"prompt": "p", "check": {"command": "true"}, "workspace": {"files": {"/abs": "y"}}}, "t.workspace.files"),
        ({"prompt": "p", "checker": "none"}, "t.checker"),
    ],
)
def test_a_malformed_agent_task_is_refused_naming_the_field(row, field):
    with pytest.raises(BadRequest) as refused:
        parse_task(row, "t")
    assert refused.value.field is not None and refused.value.field.startswith(field)


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_an_unknown_default_adapter_exits_2_naming_the_key(tmp_path: Path) -> None:
    import subprocess

    command = [sys.executable, "-m", "reef.cli.main", "serve", "--learning.recipe", "evolve"]
    command += ["--harness.default-adapter", "emacs", "--inference.upstream-url", "http://127.0.0.1:9"]
    command += ["--storage.dir", str(tmp_path / "state"), "--reef.port", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "harness.default_adapter" in result.stderr


async def test_a_candidate_with_unreviewed_extension_nodes_is_never_gated_outside_the_sandbox(tmp_path, fake_pi):
    from reef.sandbox import SandboxRefused

    evaluator = gate(tmp_path, fake_pi, [{"prompt": "hello", "check": {"file": "x", "contains": "y"}}])
    extended = HarnessTree.of([*SERVING.nodes, Node("ext", "extension", {"name": "ext", "text": "export {}"})])
    write_tree(extended, tmp_path / "extended")
    with pytest.raises(SandboxRefused, match="unreviewed nodes that run or permit things"):
        await evaluator.paired_scores("s", tmp_path / "extended", "rel_serving")
    assert not (tmp_path / "state" / "episodes").exists()  # no episode ran


def test_without_an_isolating_sandbox_the_agent_gate_blocks_learning_naming_the_setting(tmp_path, fake_pi, monkeypatch):
    from reef.sandbox import Isolation, policy

    monkeypatch.setattr(policy, "isolation", lambda: Isolation(False, "bwrap (bubblewrap) is not installed"))
    evaluator = gate(tmp_path, fake_pi, [{"prompt": "hello", "check": {"file": "x", "contains": "y"}}])
    evaluator.episodes = PiEpisodes(fake_pi, timeout_s=2, temp_dir=tmp_path)  # sandbox chosen per run
    blocked = evaluator.blocker()
    assert blocked is not None and blocked.startswith("sandbox: ") and "sandbox.allow_unsandboxed" in blocked
    evaluator.episodes = PiEpisodes(fake_pi, timeout_s=2, temp_dir=tmp_path, allow_unsandboxed=True)
    assert evaluator.blocker() is None
