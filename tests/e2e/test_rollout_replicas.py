"""A canary rollout across two real `reef serve` replicas sharing PostgreSQL and one release repository: both route
every user to the same arm, reports sent to either count once, and the decision the learner's replica takes is
the one both serve."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef.learning.rollout.assignment import arm_of
from tests.conftest import PostgresSchema
from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

S = "support"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    fake = start_fake_upstream()
    yield fake
    fake.stop()


@pytest.fixture
def database_url(postgres_schema: PostgresSchema) -> str:
    return postgres_schema.url_with_search_path


def _wait(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s (last: {last!r})")


def _rollout(url: str) -> dict[str, Any]:
    answer = httpx.get(f"{url}/reef/scenarios/{S}/rollout", timeout=10)
    if answer.status_code == 404:  # a replica learns of a scenario another one created when it next polls the store
        return {"state": "unknown scenario"}
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _ask(url: str, user: str) -> tuple[str, str]:
    chat = {"model": "m", "messages": [{"role": "user", "content": f"hello from {user}"}]}
    headers = {"x-reef-scenario": S, "x-reef-tag-user": user}
    answer = httpx.post(url + "/v1/chat/completions", json=chat, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.headers["x-reef-release-id"], answer.headers["x-reef-agent-record-id"]


def _report(url: str, score: float, receipt: str | None = None) -> None:
    body: dict[str, Any] = {"feedback": {"prompt": "p", "answer": "a"}, "score": score}
    if receipt is not None:
        body["references"] = [receipt]
    answer = httpx.post(url + "/reef/report", json=body, headers={"x-reef-scenario": S}, timeout=30)
    assert answer.status_code == 200, answer.text


def test_two_replicas_route_alike_count_once_and_serve_the_same_decision(
    upstream: FakeUpstream, database_url: str, tmp_path: Path
) -> None:
    flags = [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "tests.fakes.learning_recipe:FileRecipe",
        "--learning.batch-size", "1",
        "--learning.poll-interval-s", "0.2",
        "--learning.election-timeout-s", "3",
        "--storage.release-poll-s", "0.5",
        "--storage.record-backend", "postgres",
        "--storage.record-database-url", database_url,
        "--storage.release-repository", str(tmp_path / "releases.git"),
        "--evaluation.policy", "always",
        "--rollout.mode", "canary",
        "--rollout.canary-share", "0.5",
        "--rollout.check-interval-s", "0.2",
    ]  # fmt: skip
    replicas = [ReefProcess(tmp_path / name, *flags, "--reef.replica-id", name) for name in ("a", "b")]
    for replica in replicas:
        replica.start()
    try:
        a, b = (replica.url for replica in replicas)
        assert httpx.post(a + "/reef/scenarios", json={"name": S}, timeout=30).status_code == 201
        tasks = {"tasks": [{"prompt": "hello", "checker": "contains", "answer": "echo"}]}
        assert httpx.post(f"{a}/reef/scenarios/{S}/tasks", json=tasks, timeout=30).status_code == 201
        _report(a, 1.0)  # one demonstration: the learner's step publishes, in canary mode: a rollout
        view = _wait(lambda: _rollout(b)["state"] == "canary" and _rollout(b), 60, "the rollout seen by b")
        leader = next(
            url for url in (a, b) if httpx.get(url + "/reef/status", timeout=10).json()["scenarios"][S]["leader"]
        )
        paused = httpx.post(f"{leader}/reef/scenarios/{S}/update", json={"paused": True}, timeout=30)
        assert paused.status_code == 200, paused.text  # no more steps: the reports below only score the arms

        def arm_release(user: str) -> str:
            arm = arm_of(f"user:{user}", view["rollout_id"], 0.5)
            return str(view["candidate_release_id"] if arm == "candidate" else view["incumbent_release_id"])

        # Both replicas route every user to the arm the hash names (b may need a moment to read the rollout).
        _wait(lambda: all(_ask(b, f"u{n}")[0] == arm_release(f"u{n}") for n in range(8)), 10, "b routing by it")
        sent = 0
        for n in range(60):
            user = f"u{n}"
            served_a, receipt_a = _ask(a, user)
            served_b, receipt_b = _ask(b, user)
            if _rollout(a)["state"] != "canary":
                break  # the reports already sent decided it, perhaps between these two requests: routing moved on
            assert served_a == served_b == arm_release(user)
            score = 1.0 if served_a == view["candidate_release_id"] else 0.0  # the users prefer the canary
            _report(a, score, receipt_a)
            _report(b, score, receipt_b)
            sent += 2
            if _rollout(a)["state"] != "canary":
                break
        # A promotion is written twice: decided (no release yet), then with the release the head moved to.
        ended = _wait(lambda: (r := _rollout(a))["state"] == "promoted" and r["release_id"] and r, 30, "the promotion")
        assert _rollout(b) == ended  # one state, in the shared store
        assert ended["decided_by"] == "test"
        counted = ended["arms"]["candidate"]["reports"] + ended["arms"]["incumbent"]["reports"]
        assert 0 < counted <= sent  # each report counted at most once, on whichever replica it arrived
        _wait(lambda: all(_ask(url, f"u{n}")[0] == ended["release_id"] for url in (a, b) for n in range(6)), 10,
              "both replicas serving the promoted release to everyone")  # fmt: skip
    finally:
        for replica in replicas:
            replica.stop()
