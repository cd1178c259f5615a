"""Restarts: a crash at any point of a step leaves one release serving, and no record is trained twice."""

from __future__ import annotations

import pytest

from reef.releases.git import GitReleaseStore
from tests.fakes.learning_world import QUESTIONS, Crash, consumed_steps, crash_at, make_world, started
from tests.fakes.training_backend import FakeTrainingBackend

Q = list(QUESTIONS)


async def test_a_crash_after_publish_before_the_commit_log_rolls_the_commit_forward(tmp_path):
    world = await started(make_world(tmp_path))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]
    world.runtime.release_store._fault_hook = crash_at("ref-updated")
    with pytest.raises(Crash):
        await world.runtime.step("math")
    assert world.commits("math", -1, 10) == []

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()

    head = world.releases("math")[0]
    assert head["operation"] == "training" and world.engine.active_release_id("math") == head["release_id"]
    (recovered,) = world.commits("math", -1, 10)
    assert recovered["verdict"] == "published" and recovered["release_id"] == head["release_id"]
    assert consumed_steps(world) == {r.agent_record_id: recovered["step"] for r in reports}
    assert await world.runtime.step("math") is None
    assert world.backend.jobs == []


async def test_a_release_published_with_its_step_fields_in_its_metrics_is_rolled_forward_the_same(
    tmp_path, monkeypatch
):
    original = GitReleaseStore.publish

    def publish_as_before(self, *args, consumed_record_ids=None, trained_from=None, metrics=None, **options):
        # The learner before the step's fields had keys of their own: they rode in the release's metrics.
        step = {"trained_from": trained_from, "consumed_record_ids": list(consumed_record_ids or [])}
        return original(self, *args, metrics={**(metrics or {}), **step}, **options)

    world = await started(make_world(tmp_path))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]
    base = world.releases("math")[0]["release_id"]
    monkeypatch.setattr(GitReleaseStore, "publish", publish_as_before)
    world.runtime.release_store._fault_hook = crash_at("ref-updated")
    with pytest.raises(Crash):
        await world.runtime.step("math")
    monkeypatch.undo()

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()

    (recovered,) = world.commits("math", -1, 10)
    assert recovered["verdict"] == "published" and recovered["trained_from"] == base
    assert sorted(recovered["consumed_record_ids"]) == sorted(r.agent_record_id for r in reports)
    assert consumed_steps(world) == {r.agent_record_id: recovered["step"] for r in reports}


async def test_a_crash_after_the_commit_log_before_marking_resumes_without_retraining(tmp_path):
    world = await started(make_world(tmp_path))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]

    def die(scenario, ids, step):
        raise Crash("after the commit point")

    world.records.mark_consumed = die
    with pytest.raises(Crash):
        await world.runtime.step("math")
    (committed,) = world.commits("math", -1, 10)
    assert committed["verdict"] == "published"

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()

    assert consumed_steps(world) == {r.agent_record_id: committed["step"] for r in reports}
    assert world.engine.active_release_id("math") == committed["release_id"]
    assert await world.runtime.step("math") is None
    assert world.backend.jobs == []


async def test_a_crash_during_training_retries_the_batch_after_restart(tmp_path):
    class CrashingBackend(FakeTrainingBackend):
        def run(self, job, progress=None):
            self.jobs.append(job)
            raise Crash("killed mid-training")

    world = await started(make_world(tmp_path, backend=CrashingBackend()))
    base = world.engine.active_release_id("math")
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]
    with pytest.raises(Crash):
        await world.runtime.step("math")

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    assert world.engine.active_release_id("math") == base  # the old release still serves

    commit = await world.runtime.step("math")
    assert commit["verdict"] == "published"
    assert sorted(world.backend.trained_record_ids()) == sorted(r.agent_record_id for r in reports)


async def test_after_a_restart_only_records_not_yet_consumed_are_trained(tmp_path):
    world = await started(make_world(tmp_path))
    first = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]
    await world.runtime.step("math")
    await world.runtime.stop()

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    later = [world.report("math", q, QUESTIONS[q]) for q in Q[2:]]
    commit = await world.runtime.step("math")

    assert commit["verdict"] == "published" and commit["step"] == 2
    trained = world.backend.trained_record_ids()
    assert sorted(trained) == sorted(r.agent_record_id for r in later)
    assert not set(trained) & {r.agent_record_id for r in first}
