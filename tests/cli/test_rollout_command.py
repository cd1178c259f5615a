"""`reef rollout`: its help, and how it prints a rollout."""

from __future__ import annotations

from pathlib import Path

import pytest

from reef.cli.main import main as reef_cli
from reef.cli.rollout import describe


def test_the_rollout_command_documents_its_actions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        reef_cli(["rollout", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "promote" in out and "rollback" in out


def test_an_unknown_action_is_refused_before_anything_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        reef_cli(["rollout", "math", "restart", "--url", "http://127.0.0.1:9"])
    assert done.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_rollout_prints_both_arms_and_the_decision() -> None:
    arm = {"requests": 10, "errors": 1, "reports": 4, "mean": 0.25, "interval": [0.0, 0.9]}
    view = {
        "state": "rolled_back",
        "rollout_id": "rollout_1",
        "share": 0.1,
        "candidate_release_id": "c" * 40,
        "incumbent_release_id": "i" * 40,
        "arms": {"candidate": arm, "incumbent": {**arm, "mean": None}},
        "difference": {"interval": [-0.9, -0.1]},
        "decision": "rollback",
        "decided_by": "test",
        "reason": "worse",
    }
    text = "\n".join(describe("math", view))
    assert "rollout rollout_1 rolled_back" in text
    assert "candidate 10 requests, 1 failed, 4 reports, mean 0.250 in [0.000, 0.900]" in text
    assert "decision: rollback (test): worse" in text
    assert describe("math", {"state": "none"}) == ["scenario math: no rollout yet"]


@pytest.mark.parametrize("share", ["0", "1", "1.5"])
def test_reef_serve_refuses_a_canary_share_outside_zero_one_with_exit_2_naming_it(
    share: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        reef_cli(["serve", "--rollout.canary-share", share])
    assert done.value.code == 2
    assert "rollout.canary_share" in capsys.readouterr().err


def test_reef_serve_refuses_canary_for_a_recipe_that_publishes_no_trained_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--inference.upstream-url", "http://127.0.0.1:9", "--learning.recipe", "basic"]
    code = reef_cli(["serve", *flags, "--rollout.mode", "canary", "--storage.dir", str(tmp_path / "state")])
    assert code == 2
    assert "rollout.mode: canary is not available" in capsys.readouterr().err
