"""Untrusted code refuses to run without an isolating sandbox unless the operator allows it, and says why."""

from __future__ import annotations

import sys

import pytest

from reef.discovery.evaluation import EvaluatorFailure, evaluate_attempt
from reef.discovery.problem import load_problem
from reef.sandbox import Isolation, SandboxRefused, choose_sandbox, describe_sandbox, policy, run_sandboxed
from reef.sandbox.policy import probe_isolation


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy, "isolation", lambda: Isolation(False, "bwrap (bubblewrap) is not installed"))


def test_a_missing_bubblewrap_is_no_isolating_sandbox() -> None:
    found = probe_isolation("reef-no-such-bwrap")
    assert not found.available and "not installed" in found.reason


def test_without_bubblewrap_a_sandboxed_run_refuses_naming_the_setting(no_bwrap: None) -> None:
    with pytest.raises(SandboxRefused, match="sandbox.allow_unsandboxed"):
        run_sandboxed([sys.executable, "-c", "print(1)"])
    with pytest.raises(SandboxRefused, match="sandbox.allow_unsandboxed"):
        choose_sandbox(False, "an agent episode")
    assert "refuse" in describe_sandbox(False)


def test_without_bubblewrap_a_discovery_attempt_is_an_evaluator_failure_not_a_score(no_bwrap: None) -> None:
    problem = load_problem("circle-packing")
    with pytest.raises(EvaluatorFailure, match="isolating sandbox"):
        evaluate_attempt(problem, problem.seeds[0])


def test_the_operator_may_allow_unsandboxed_runs(no_bwrap: None) -> None:
    assert choose_sandbox(True, "an agent episode") is False
    assert "NONE" in describe_sandbox(True)
    result = run_sandboxed([sys.executable, "-c", "print('ran')"], sandbox=False)
    assert result.ok and not result.sandboxed and result.stdout.strip() == "ran"
