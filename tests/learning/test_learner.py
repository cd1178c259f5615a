"""The learner end to end on real SQLite, real git and the real commit log, with a fake engine and backend."""

from __future__ import annotations

import asyncio

from reef.learning.steps import MAX_ATTEMPTS
from tests.fakes.learning_recipe import FileRecipe
from tests.fakes.learning_world import QUESTIONS, considered, consumed_steps, make_world, started
from tests.fakes.training_backend import FakeTrainingBackend

Q = list(QUESTIONS)


async def test_a_batch_of_reports_produces_a_release_that_becomes_active(tmp_path):
    world = await started(make_world(tmp_path))
    base = world.engine.active_release_id("math")
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]

    commit = await world.runtime.step("math")

    assert commit["verdict"] == "published"
    assert commit["parent_release_id"] == base
    assert world.engine.active_release_id("math") == commit["release_id"] != base
    assert ("math", commit["release_id"]) in world.engine.activations
    assert commit["candidate_scores"] == [1.0, 1.0, 0.0, 0.0]
    assert commit["current_scores"] == [0.0, 0.0, 0.0, 0.0]
    assert world.commits("math", -1, 10)[-1]["verdict"] == "published"
    assert consumed_steps(world) == {r.agent_record_id: commit["step"] for r in reports}
    newest = world.releases("math")[0]
    assert newest["release_id"] == commit["release_id"] and newest["current"] and newest["operation"] == "training"


async def test_a_bad_candidate_is_rejected_and_the_old_release_keeps_serving(tmp_path):
    world = await started(make_world(tmp_path))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    good = await world.runtime.step("math")
    world.backend.corrupt = True
    bad_reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]

    commit = await world.runtime.step("math")

    assert commit["verdict"] == "rejected"
    assert commit["release_id"] is None
    assert "losses 2" in commit["reason"]
    assert commit["candidate_scores"] == [0.0, 0.0, 0.0, 0.0]
    assert world.engine.active_release_id("math") == good["release_id"]
    assert world.releases("math")[0]["release_id"] == good["release_id"]
    # Rejected records are consumed all the same: the commit says why they were not used.
    assert all(consumed_steps(world)[r.agent_record_id] == commit["step"] for r in bad_reports)
    assert await world.runtime.step("math") is None


async def test_nothing_ready_means_no_step(tmp_path):
    world = await started(make_world(tmp_path))
    assert await world.runtime.step("math") is None
    assert world.commits("math", -1, 10) == []


async def test_auto_mode_steps_on_its_own_once_a_batch_is_ready(tmp_path):
    world = await started(make_world(tmp_path, mode="auto"))
    try:
        first = world.report("math", Q[0], QUESTIONS[Q[0]])
        await considered(world, first)
        assert world.commits("math", -1, 10) == []  # one unit is not a batch of two
        world.report("math", Q[1], QUESTIONS[Q[1]])
        for _ in range(400):
            if world.commits("math", -1, 10):
                break
            await asyncio.sleep(0.05)
        assert [c["verdict"] for c in world.commits("math", -1, 10)] == ["published"]
    finally:
        await world.runtime.stop()


async def test_a_failing_training_job_is_skipped_and_its_batch_retried(tmp_path):
    world = await started(make_world(tmp_path, backend=FakeTrainingBackend(fail_times=1)))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]

    skipped = await world.runtime.step("math")
    assert skipped["verdict"] == "skipped"
    assert "fake training job crashed" in skipped["reason"] and "retried" in skipped["reason"]
    assert skipped["consumed_record_ids"] == []
    assert set(consumed_steps(world).values()) == {None}
    assert world.runtime.status()["scenarios"]["math"]["errors"][-1]["step"] == skipped["step"]

    published = await world.runtime.step("math")
    assert published["verdict"] == "published" and published["step"] == skipped["step"] + 1
    assert sorted(published["consumed_record_ids"]) == sorted(r.agent_record_id for r in reports)


async def test_a_batch_that_keeps_failing_is_given_up_after_its_last_attempt(tmp_path):
    world = await started(make_world(tmp_path, backend=FakeTrainingBackend(fail_times=MAX_ATTEMPTS)))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]
    commits = [await world.runtime.step("math") for _ in range(MAX_ATTEMPTS)]
    assert [c["verdict"] for c in commits] == ["skipped"] * MAX_ATTEMPTS
    assert "gave up" in commits[-1]["reason"]
    assert consumed_steps(world) == {r.agent_record_id: commits[-1]["step"] for r in reports}
    assert await world.runtime.step("math") is None


async def test_without_tasks_a_scoring_policy_trains_nothing_and_says_why_once(tmp_path):
    world = await started(make_world(tmp_path, tasks=None))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    first = await world.runtime.step("math")
    again = await world.runtime.step("math")
    assert first["verdict"] == "skipped" and "no gate tasks" in first["reason"]
    assert again == first
    assert len(world.commits("math", -1, 10)) == 1
    assert world.backend.jobs == []
    assert set(consumed_steps(world).values()) == {None}
    assert "no gate tasks" in world.runtime.status()["scenarios"]["math"]["blocked"]


async def test_without_tasks_the_always_policy_publishes(tmp_path):
    world = await started(make_world(tmp_path, tasks=None, policy="always"))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "published" and commit["candidate_scores"] == []
    assert world.engine.active_release_id("math") == commit["release_id"]


async def test_an_evaluation_error_fails_closed(tmp_path):
    world = await started(make_world(tmp_path))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    world.engine.fail_with = ConnectionError("engine down")
    base = world.engine.active_release_id("math")
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "rejected" and "evaluation failed" in commit["reason"]
    assert world.engine.active_release_id("math") == base


async def test_review_mode_stores_a_pending_release_that_serves_only_once_promoted(tmp_path):
    world = await started(make_world(tmp_path, review=True))
    base = world.engine.active_release_id("math")
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "pending"
    assert world.engine.active_release_id("math") == base
    pending = next(r for r in world.releases("math") if r["release_id"] == commit["release_id"])
    assert pending["pending"] and not pending["current"]

    promoted = await world.runtime.promote("math", commit["release_id"])
    assert promoted.operation == "promote"
    assert world.engine.active_release_id("math") == promoted.release_id


async def test_a_recipe_that_grows_its_own_candidate_needs_no_training_backend(tmp_path):
    world = await started(make_world(tmp_path, recipe_cls=FileRecipe))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "published"
    assert commit["metrics"]["proposals"] == 2
    assert world.backend.jobs == []


async def test_status_shows_step_buffer_verdict_scores_and_serving_release(tmp_path):
    world = await started(make_world(tmp_path))
    for q in Q[:3]:
        world.report("math", q, QUESTIONS[q])
    commit = await world.runtime.step("math")
    await world.runtime.step("math")  # no-op: one unit left, but manual steps take what is ready
    status = world.runtime.status()
    entry = status["scenarios"]["math"]
    assert status["recipe"] == "demo" and status["learning"]["mode"] == "manual"
    assert entry["current_release_id"] == world.engine.active_release_id("math")
    assert entry["job"] == {"state": "idle"}
    assert entry["last_commit"]["verdict"] in ("published", "kept", "rejected")
    assert entry["last_commit"]["step"] == commit["step"] + 1
    assert entry["recent_losses"][:2] == [1.0, 0.5]
    assert set(entry) >= {"step", "ready", "batch_size", "errors", "blocked", "mode"}


async def test_a_rollback_during_a_step_wins_and_the_batch_is_retried_on_the_new_head(tmp_path):
    class RollsBackMidStep(FileRecipe):
        hook = None

        async def grow(self, batch, parent_dir, ctx):
            if self.hook is not None:
                hook, self.hook = self.hook, None
                await hook()
            return await super().grow(batch, parent_dir, ctx)

    world = await started(make_world(tmp_path, recipe_cls=RollsBackMidStep))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    first = await world.runtime.step("math")
    base = world.releases("math")[-1]["release_id"]
    restored = []

    async def roll_back():
        restored.append(await world.runtime.rollback("math", base))

    world.runtime.recipe.hook = roll_back
    later = [world.report("math", q, QUESTIONS[q]) for q in Q[2:]]

    skipped = await world.runtime.step("math")
    assert skipped["verdict"] == "skipped" and "head moved" in skipped["reason"]
    assert world.engine.active_release_id("math") == restored[0].release_id != first["release_id"]

    retried = await world.runtime.step("math")
    assert retried["verdict"] == "published" and retried["parent_release_id"] == restored[0].release_id
    assert sorted(retried["consumed_record_ids"]) == sorted(r.agent_record_id for r in later)
    assert world.runtime.status()["scenarios"]["math"]["consecutive_failures"] == 0


async def test_records_a_processor_asks_for_are_read_back_by_id(tmp_path):
    import time

    from reef.core.records import Record

    world = await started(make_world(tmp_path))
    (early,) = world.records.append([Record.new("math", "inference", {"request": {}}, created_at=time.time())])
    assert await world.runtime.step("math") is None  # the learner has read past it
    processor = world.runtime.scenarios.learners["math"]._processor
    assert processor.ingested.count(early.agent_record_id) == 1
    processor.wanted = lambda: [early.agent_record_id, "rec_never_stored"]  # e.g. let go of, then cited
    await world.runtime.step("math")
    assert processor.ingested.count(early.agent_record_id) == 2
    await world.runtime.stop()
