"""Learner elections: the file lock (SQLite, one machine) and PostgreSQL advisory locks, and what a lost lock does."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from reef.coordination.election import FileElection, PostgresElection, SoleElection, lock_key
from tests.fakes.learning_recipe import DemoRecipe
from tests.fakes.learning_world import QUESTIONS, consumed_steps, make_settings, open_world, started
from tests.fakes.training_backend import FakeTrainingBackend


def test_one_file_lock_holder_per_scenario_and_the_others_name_it(tmp_path: Path) -> None:
    a, b = FileElection(tmp_path, "a"), FileElection(tmp_path, "b")
    assert b.leader_of("math") is None
    assert a.try_lead("math") and a.try_lead("math")  # held: asking again is a yes
    assert not b.try_lead("math")
    assert b.try_lead("other")  # scenarios elect separately
    assert b.leader_of("math") == "a" and a.leader_of("other") == "b"
    assert a.holds("math") and not b.holds("math")
    a.resign("math")
    assert b.leader_of("math") is None
    assert b.try_lead("math") and b.leader_of("math") == "b"
    b.close()
    a.close()


def test_a_killed_holder_releases_its_file_lock(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from reef.coordination.election import FileElection;"
        f"e = FileElection(Path({str(tmp_path)!r}), 'doomed'); assert e.try_lead('math'); print('held', flush=True);"
        "time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        other = FileElection(tmp_path, "survivor")
        assert not other.try_lead("math") and other.leader_of("math") == "doomed"
        holder.kill()
        holder.wait()
        assert other.try_lead("math") and other.leader_of("math") == "survivor"
        other.close()
    finally:
        holder.kill()
        holder.wait()


def test_lock_keys_differ_by_deployment_and_scenario() -> None:
    keys = {lock_key(d, s) for d in ("db/a", "db/b") for s in ("math", "code")}
    assert len(keys) == 4 and all(-(2**63) <= key < 2**63 for key in keys)


@pytest.fixture
def deployment(postgres_url: str) -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.mark.postgres
def test_postgres_advisory_locks_elect_one_leader_and_a_lost_session_loses_it(
    postgres_url: str, deployment: str
) -> None:
    a, b = PostgresElection(postgres_url, deployment, "a"), PostgresElection(postgres_url, deployment, "b")
    elsewhere = PostgresElection(postgres_url, deployment + "-other", "c")
    try:
        assert a.try_lead("math") and not b.try_lead("math")
        assert elsewhere.try_lead("math")  # another deployment in the same database elects on its own
        assert b.leader_of("math") == "a" and a.holds("math") and not b.holds("math")
        # The leader's connection is cut (as by a network failure or a restarted server): its lock is gone.
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'a'")
        assert not a.holds("math")
        assert b.try_lead("math") and a.leader_of("math") == "b"
        assert not a.try_lead("math")  # reconnected, but the lock is b's now
        b.resign("math")
        assert a.try_lead("math")
    finally:
        for election in (a, b, elsewhere):
            election.close()


class Revocable(SoleElection):
    """Leads until `revoked` is set (as when the lock's session is lost)."""

    revoked = False

    def holds(self, scenario: str) -> bool:
        return not self.revoked


async def test_a_leader_that_lost_its_lock_stops_before_publishing_and_writes_nothing(tmp_path: Path) -> None:
    election = Revocable("me")
    world = open_world(tmp_path, make_settings(tmp_path, policy="always"), election=election)
    await started(world)
    head = world.engine.active_release_id("math")
    for question in list(QUESTIONS)[:2]:
        world.report("math", question, QUESTIONS[question])
    election.revoked = True
    with pytest.raises(Exception, match="lost the learner lock"):
        await world.runtime.step("math")
    assert world.backend.jobs  # it trained; it did not publish
    assert world.engine.active_release_id("math") == head
    assert world.runtime.release_store.head("math").release_id == head  # type: ignore[union-attr]
    assert world.commits("math", -1, 10) == []
    assert set(consumed_steps(world).values()) == {None}  # the batch is left for the next leader
    await world.runtime.stop()


async def test_status_names_the_replica_and_the_leader(tmp_path: Path) -> None:
    world = await started(open_world(tmp_path, make_settings(tmp_path), election=SoleElection("replica-1")))
    status = world.runtime.status()
    assert status["replica_id"] == "replica-1"
    assert status["scenarios"]["math"]["leader"] is True and status["scenarios"]["math"]["leader_id"] == "replica-1"
    await world.runtime.stop()


async def test_a_leader_that_lost_its_lock_writes_no_skipped_step_for_a_failed_job(tmp_path: Path) -> None:
    election = Revocable("me")
    backend = FakeTrainingBackend(fail_times=1)
    settings = make_settings(tmp_path, policy="always")
    world = await started(open_world(tmp_path, settings, DemoRecipe, backend, election=election))
    for question in list(QUESTIONS)[:2]:
        world.report("math", question, QUESTIONS[question])
    election.revoked = True
    with pytest.raises(Exception, match="lost the learner lock"):
        await world.runtime.step("math")
    assert backend.jobs and world.commits("math", -1, 10) == []
    assert set(consumed_steps(world).values()) == {None}
    await world.runtime.stop()
