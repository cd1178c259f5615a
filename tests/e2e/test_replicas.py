"""Scale-out for real: replicas (PostgreSQL, one shared bare release repository) and `--reef.workers 2` (SQLite).

Each test runs real `reef serve` processes in front of the fake provider, with a harness-surface fake recipe whose
growing takes a few seconds (`SlowFileRecipe`) and the `always` policy, so a step publishes without a model.
It checks: exactly one replica leads the scenario and every replica names it; reports sent to both replicas
make exactly one commit per batch, no record consumed twice; kill -9 of the leader while it is growing a
candidate → another replica leads within the election and finishes that batch (the dead one wrote nothing);
every replica serves each new release (`x-reef-release-id`) within 5 s of its commit, and a rollback asked
of any replica serves on all.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import PostgresSchema
from tests.fakes.reef_process import ReefProcess, free_port
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

pytestmark = pytest.mark.e2e

SCENARIO = "support"
ELECTION_TIMEOUT_S = 3.0
SYNC_BOUND_S = 5.0  # the promise: every replica serves a new release within 5 s of its publish
# The promise: a new leader within the election timeout; the margin covers reading the status under load.
TAKEOVER_BOUND_S = ELECTION_TIMEOUT_S + 2.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    fake = start_fake_upstream()
    yield fake
    fake.stop()


def _flags(upstream: FakeUpstream, *extra: str) -> list[str]:
    return [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "tests.fakes.learning_recipe:SlowFileRecipe",
        "--learning.recipe-config", "{grow_s: 4}",
        "--learning.batch-size", "2",
        "--learning.poll-interval-s", "0.2",
        "--learning.election-timeout-s", str(ELECTION_TIMEOUT_S),
        "--storage.release-poll-s", "0.5",
        "--evaluation.policy", "always",
        *extra,
    ]  # fmt: skip


def _wait(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except httpx.HTTPError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s (last: {last!r})")


def _status(url: str) -> dict[str, Any]:
    return httpx.get(url + "/reef/status", timeout=10).json()  # type: ignore[no-any-return]


def _scenario(url: str) -> dict[str, Any] | None:
    return _status(url)["scenarios"].get(SCENARIO)  # type: ignore[no-any-return]


def _report(url: str, prompt: str) -> str:
    body = {"feedback": {"prompt": prompt, "answer": prompt.upper()}}
    answer = httpx.post(url + "/reef/report", json=body, headers={"x-reef-scenario": SCENARIO}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["agent_record_id"]  # type: ignore[no-any-return]


def _served(url: str) -> str:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(url + "/v1/chat/completions", json=chat, headers={"x-reef-scenario": SCENARIO}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.headers["x-reef-release-id"]


def _commits(url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{url}/reef/scenarios/{SCENARIO}/commits", timeout=10).json()["commits"]  # type: ignore[no-any-return]


def _all_serve(urls: list[str], release_id: str) -> None:
    """Every replica (each URL asked a few times: workers share a port) serves `release_id` within the bound."""
    _wait(lambda: all(_served(url) == release_id for url in urls for _ in range(4)), SYNC_BOUND_S, f"{release_id}")


def _consumed_once(commits: list[dict[str, Any]], batches: list[list[str]]) -> None:
    consumed = [record_id for commit in commits for record_id in commit["consumed_record_ids"]]
    assert len(consumed) == len(set(consumed)), "a record was consumed twice"
    assert [sorted(c["consumed_record_ids"]) for c in commits] == [sorted(batch) for batch in batches]
    assert [c["verdict"] for c in commits] == ["published"] * len(batches)
    assert [c["step"] for c in commits] == list(range(1, len(batches) + 1))


# ---- two replicas on PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def database_url(postgres_schema: PostgresSchema) -> str:
    return postgres_schema.url_with_search_path


@pytest.mark.postgres
def test_two_replicas_on_postgres_elect_one_learner_take_over_on_kill_and_sync_releases(
    upstream: FakeUpstream, database_url: str, tmp_path: Path
) -> None:
    shared = ["--storage.record-backend", "postgres", "--storage.record-database-url", database_url,
              "--storage.release-repository", str(tmp_path / "releases.git")]  # fmt: skip
    replicas = {
        name: ReefProcess(tmp_path / name, *_flags(upstream, *shared, "--reef.replica-id", f"replica-{name}"))
        for name in ("a", "b")
    }
    for replica in replicas.values():
        replica.start()
    try:
        a, b = replicas["a"].url, replicas["b"].url
        assert httpx.post(a + "/reef/scenarios", json={"name": SCENARIO}, timeout=30).status_code == 201

        # Exactly one leads; both name it (b learns of the scenario from the shared store).
        def elected() -> str | None:
            seen = [_scenario(a), _scenario(b)]
            if None in seen or len({s["leader_id"] for s in seen if s}) != 1:
                return None
            leaders = [s for s in seen if s and s["leader"]]
            return leaders[0]["leader_id"] if len(leaders) == 1 else None

        leader_id = _wait(elected, 30, "one leader named by both replicas")
        assert {_status(a)["replica_id"], _status(b)["replica_id"]} == {"replica-a", "replica-b"}
        leader, follower = ("a", "b") if leader_id == "replica-a" else ("b", "a")

        # Reports to both replicas: one commit for the batch, by the leader, from the shared store.
        first = [_report(a, "one"), _report(b, "two")]
        commits = _wait(lambda: len(_commits(a)) >= 1 and _commits(a), 60, "the first batch's commit")
        assert _commits(b) == commits  # one commit log, shared through the database
        _all_serve([a, b], commits[0]["release_id"])

        # The second batch: kill -9 the leader while it grows the candidate; the follower takes over and finishes.
        second = [_report(replicas[follower].url, "three"), _report(replicas[leader].url, "four")]
        _wait(lambda: (_scenario(replicas[leader].url) or {}).get("job", {}).get("state") == "growing", 30, "growing")
        replicas[leader].kill()
        killed_at = time.monotonic()
        survivor = replicas[follower].url
        _wait(lambda: (_scenario(survivor) or {}).get("leader"), TAKEOVER_BOUND_S, "the follower leading")
        took_over_s = time.monotonic() - killed_at
        print(f"takeover after kill -9: {took_over_s:.1f} s (election timeout {ELECTION_TIMEOUT_S} s)")
        commits = _wait(lambda: len(_commits(survivor)) >= 2 and _commits(survivor), 60, "the second batch's commit")
        _consumed_once(commits, [first, second])
        assert _scenario(survivor)["leader_id"] == f"replica-{follower}"  # type: ignore[index]

        # The killed replica comes back as a follower and serves the new release; a rollback asked of it serves
        # on both.
        restarted = ReefProcess(tmp_path / leader, *replicas[leader].flags, port=free_port()).start()
        replicas[leader] = restarted
        _all_serve([restarted.url, survivor], commits[1]["release_id"])
        back = _scenario(restarted.url)
        assert back is not None and back["leader"] is False and back["leader_id"] == f"replica-{follower}"
        rolled = httpx.post(
            f"{restarted.url}/reef/scenarios/{SCENARIO}/rollback", json={"release_id": commits[0]["release_id"]}
        )
        assert rolled.status_code == 200, rolled.text
        _all_serve([restarted.url, survivor], rolled.json()["release_id"])

        # A scenario deleted on one replica stops being served on the other.
        assert httpx.delete(f"{survivor}/reef/scenarios/{SCENARIO}", timeout=30).status_code in (200, 204)
        _wait(lambda: _scenario(restarted.url) is None, 30, "the deletion seen by the other replica")
    finally:
        for replica in replicas.values():
            replica.stop()


# ---- one machine, SQLite, --reef.workers 2 -------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_two_workers_on_sqlite_share_one_writer_elect_one_learner_and_take_over_on_kill(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    server = ReefProcess(tmp_path / "state", *_flags(upstream, "--reef.workers", "2")).start()
    try:
        url = server.url
        assert server.process is not None
        assert httpx.post(url + "/reef/scenarios", json={"name": SCENARIO}, timeout=30).status_code == 201

        def workers() -> list[int]:
            assert server.process is not None
            return [pid for pid in _children(server.process.pid) if "reef.cli.main" in _cmdline(pid)]

        # Two serving workers and one record writer, all children of the supervisor; workers start no writer.
        _wait(lambda: len(workers()) == 2, 60, "two workers")
        writers = [pid for pid in _children(server.process.pid) if "writer_process" in _cmdline(pid)]
        assert len(writers) == 1
        assert all(not _children(worker) for worker in workers())

        # Both workers answer on the one port and name the same leader, one of them.
        def agreed() -> str | None:
            answers = [_status(url) for _ in range(12)]
            replica_ids = {answer["replica_id"] for answer in answers}
            scenarios = [answer["scenarios"].get(SCENARIO) for answer in answers]
            leader_ids = {s["leader_id"] for s in scenarios if s}
            leading = {answer["replica_id"] for answer, s in zip(answers, scenarios, strict=True) if s and s["leader"]}
            if len(replica_ids) == 2 and None not in scenarios and len(leader_ids) == 1 and leading == leader_ids:
                return leader_ids.pop()
            return None

        leader_id = _wait(agreed, 30, "both workers naming one leader")
        leader_pid = int(leader_id.rsplit(":", 1)[1])
        assert leader_pid in workers()

        first = [_report(url, "one"), _report(url, "two")]
        commits = _wait(lambda: len(_commits(url)) >= 1 and _commits(url), 60, "the first batch's commit")
        _all_serve([url], commits[0]["release_id"])

        second = [_report(url, "three"), _report(url, "four")]

        def leader_growing() -> bool:
            answers = [_status(url) for _ in range(6)]
            return any(
                a["replica_id"] == leader_id and a["scenarios"][SCENARIO]["job"]["state"] == "growing" for a in answers
            )

        _wait(leader_growing, 30, "the leader growing the second batch")
        os.kill(leader_pid, signal.SIGKILL)
        new_leader = _wait(
            lambda: (lambda s: s["leader_id"] not in (None, leader_id) and s["leader_id"])(_scenario(url)),
            TAKEOVER_BOUND_S,
            "another worker leading",
        )
        assert int(new_leader.rsplit(":", 1)[1]) != leader_pid
        commits = _wait(lambda: len(_commits(url)) >= 2 and _commits(url), 60, "the second batch's commit")
        _consumed_once(commits, [first, second])
        _wait(lambda: len(workers()) == 2, 60, "the killed worker started again")
        _all_serve([url], commits[1]["release_id"])

        # kill -9 of the record writer: the supervisor starts a new one and the workers on it; nothing acknowledged
        # is lost (the commits above and their records are still there) and appends work again.
        before = set(workers())
        os.kill(writers[0], signal.SIGKILL)
        _wait(lambda: len(set(workers()) - before) == 2, 90, "both workers restarted on a new writer")
        _wait(lambda: httpx.post(url + "/reef/report", json={"feedback": {"prompt": "p", "answer": "a"}},
                                 headers={"x-reef-scenario": SCENARIO}, timeout=30).status_code == 200,
              60, "a report accepted again")  # fmt: skip
        writers = [pid for pid in _children(server.process.pid) if "writer_process" in _cmdline(pid)]
        assert len(writers) == 1 and _commits(url) == commits

        # Ctrl-C: every worker drains, the writer stops, the supervisor exits 0.
        pids = [*workers(), *writers]
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=60) == 0
        assert not [pid for pid in pids if Path(f"/proc/{pid}").exists() and "reef" in _cmdline(pid)]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("flag", "value", "key"),
    [
        ("--reef.workers", "0", "reef.workers"),
        ("--learning.election-timeout-s", "0", "learning.election_timeout_s"),
        ("--storage.release-poll-s", "-1", "storage.release_poll_s"),
    ],
)
def test_bad_scale_out_settings_exit_2_naming_the_key(flag: str, value: str, key: str) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "reef.cli.main", "serve", flag, value]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert key in result.stderr
