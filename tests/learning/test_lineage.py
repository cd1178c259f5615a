"""The working lineage: a tie is not a loss — the next step trains from the candidate that did not lose."""

from __future__ import annotations

import pytest

from reef.core.errors import NotFound
from tests.fakes.dict_engine import read_answers
from tests.fakes.learning_world import QUESTIONS, Crash, crash_at, make_world, started
from tests.fakes.training_backend import FakeTrainingBackend

Q = list(QUESTIONS)
UNGATED = {f"what is {n} times {n}?": str(n * n) for n in range(1, 5)}  # prompts the gate does not ask
U = list(UNGATED)


def head_answers(world, scenario="math"):
    store = world.runtime.release_store
    return read_answers(store.materialize(store.head(scenario)))


async def learn(world, prompts):
    """Report the right answers to gate questions and run one step (published, or lost if the backend corrupts)."""
    for q in prompts:
        world.report("math", q, QUESTIONS[q])
    return await world.runtime.step("math")


async def tie(world, prompts):
    for prompt in prompts:
        world.report("math", prompt, UNGATED[prompt])
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "kept", commit["reason"]
    return commit


async def test_a_tied_candidate_is_kept_and_the_next_step_trains_from_it_until_the_lineage_publishes(tmp_path):
    world = await started(make_world(tmp_path))
    base = world.engine.active_release_id("math")

    first = await tie(world, U[:2])
    second = await tie(world, U[2:])
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    third = await world.runtime.step("math")

    assert first["release_id"] and first["parent_release_id"] == base and first["trained_from"] == base
    assert "did not lose" in first["reason"] and first["candidate_scores"] == first["current_scores"]
    assert world.engine.active_release_id("math") == third["release_id"]  # a kept tip never serves
    assert second["trained_from"] == first["release_id"]
    assert third["verdict"] == "published" and third["trained_from"] == second["release_id"]
    assert head_answers(world) == {**UNGATED, **{q: QUESTIONS[q] for q in Q[:2]}}  # every step's learning is there
    assert [r["operation"] for r in world.releases("math")] == ["training", "creation"]  # tips are unlisted
    assert world.runtime.release_store.lineage("math") is None
    assert world.runtime.status()["scenarios"]["math"]["lineage"] == {"tip_release_id": None}


async def test_a_request_may_pin_the_live_tip_to_sample_from_the_weights_the_next_step_trains_from(tmp_path):
    world = await started(make_world(tmp_path))
    serving = await learn(world, Q[:2])
    kept = await tie(world, U[:2])

    pinned = world.runtime.context_for("math", kept["release_id"])
    assert pinned.release_id == kept["release_id"]
    learnt = {**{q: QUESTIONS[q] for q in Q[:2]}, **{u: UNGATED[u] for u in U[:2]}}
    assert read_answers(pinned.candidate_path) == learnt  # the tip's weights, not the serving release's
    assert world.engine.active_release_id("math") == serving["release_id"]

    world.backend.corrupt = True
    lost = await learn(world, Q[:2])
    assert lost["verdict"] == "rejected" and world.runtime.release_store.lineage("math") is None
    with pytest.raises(NotFound, match=kept["release_id"]):
        world.runtime.context_for("math", kept["release_id"])


async def test_a_losing_candidate_is_dropped_and_the_lineage_returns_to_the_serving_release(tmp_path):
    world = await started(make_world(tmp_path))
    serving = await learn(world, Q[:2])
    kept = await tie(world, U[:2])
    world.backend.corrupt = True
    lost = await learn(world, Q[:2])
    world.backend.corrupt = False
    after = await learn(world, Q[2:])

    assert lost["verdict"] == "rejected" and lost["trained_from"] == kept["release_id"]
    assert "losses 2" in lost["reason"]
    assert world.runtime.release_store.lineage("math") is None
    assert after["verdict"] == "published" and after["trained_from"] == serving["release_id"]
    assert head_answers(world) == QUESTIONS  # the dropped lineage's learning is gone


async def test_the_lineage_survives_a_restart(tmp_path):
    world = await started(make_world(tmp_path))
    kept = await tie(world, U[:2])
    await world.runtime.stop()

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    assert world.runtime.status()["scenarios"]["math"]["lineage"] == {"tip_release_id": kept["release_id"]}
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    published = await world.runtime.step("math")

    assert published["verdict"] == "published" and published["trained_from"] == kept["release_id"]
    assert world.backend.jobs[0].parent_adapter_path is not None
    assert set(head_answers(world)) == set(U[:2]) | set(Q[:2])


async def test_a_crash_after_keeping_a_tip_before_its_commit_rolls_the_step_forward(tmp_path):
    world = await started(make_world(tmp_path))
    reports = [world.report("math", prompt, UNGATED[prompt]) for prompt in U[:2]]

    world.runtime.release_store._fault_hook = crash_at("lineage-kept")
    with pytest.raises(Crash):
        await world.runtime.step("math")
    assert world.commits("math", -1, 10) == []

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    (recovered,) = world.commits("math", -1, 10)
    tip = world.runtime.release_store.lineage("math")

    assert recovered["verdict"] == "kept" and recovered["release_id"] == tip.release_id
    consumed = {r.agent_record_id: r.consumed_step for r in world.records.page("math", 0, 100)}
    assert consumed == {r.agent_record_id: recovered["step"] for r in reports}
    assert await world.runtime.step("math") is None and world.backend.jobs == []  # nothing is trained twice


async def test_a_rollback_starts_a_new_lineage_from_the_release_it_restores(tmp_path):
    world = await started(make_world(tmp_path))
    base = world.engine.active_release_id("math")
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    await world.runtime.step("math")
    await tie(world, U[:2])

    restored = await world.runtime.rollback("math", base)
    for q in Q[2:]:
        world.report("math", q, QUESTIONS[q])
    after = await world.runtime.step("math")

    assert after["verdict"] == "published" and after["trained_from"] == restored.release_id
    assert head_answers(world) == {q: QUESTIONS[q] for q in Q[2:]}


async def test_review_mode_ends_the_lineage_with_a_pending_release(tmp_path):
    world = await started(make_world(tmp_path, review=True))
    kept = await tie(world, U[:2])
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])

    pending = await world.runtime.step("math")

    assert pending["verdict"] == "pending" and pending["trained_from"] == kept["release_id"]
    assert world.runtime.release_store.lineage("math") is None
    assert world.engine.active_release_id("math") == pending["parent_release_id"]
