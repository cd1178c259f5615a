"""Training control on the learner: modes, pause, requested steps (with text and a release to train from), and a
request that survives a restart — on real SQLite, git and the commit log, with the fake engine and backend."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reef.core.errors import BadRequest, Conflict, NotFound
from reef.learning.base import Batch
from tests.fakes.learning_recipe import FileRecipe
from tests.fakes.learning_world import QUESTIONS, World, considered, consumed_steps, make_world, started

Q = list(QUESTIONS)


async def _commits_after(world: World, step: int, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    for _ in range(int(timeout_s / 0.05)):
        commits = [c for c in world.commits("math", step, 100)]
        if commits and world.runtime.contract("math")["requested"] is None:
            return commits
        await asyncio.sleep(0.05)
    raise AssertionError("no commit arrived")


async def test_manual_mode_trains_only_on_request_and_the_commit_names_the_request(tmp_path):
    world = await started(make_world(tmp_path, mode="manual", batch_size=4))
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]  # half a batch: auto would wait
    await considered(world, reports[-1])
    assert world.commits("math") == []

    queued = await world.runtime.request_step("math")

    assert queued["state"] == "queued" and queued["step_id"].startswith("stp_")
    (commit,) = await _commits_after(world, -1)
    assert commit["verdict"] == "published"
    assert commit["metrics"]["request"] == {"step_id": queued["step_id"], "text": None, "release_id": None}
    assert consumed_steps(world) == {r.agent_record_id: commit["step"] for r in reports}
    await world.runtime.stop()


async def test_auto_mode_refuses_requests_and_hybrid_takes_both(tmp_path):
    world = await started(make_world(tmp_path, mode="auto", batch_size=2))
    world.report("math", Q[0], QUESTIONS[Q[0]])
    with pytest.raises(Conflict, match="training_mode auto"):
        await world.runtime.request_step("math")

    assert (await world.runtime.update_control("math", training_mode="hybrid"))["training_mode"] == "hybrid"
    queued = await world.runtime.request_step("math")  # one unit ready: a requested step takes it
    (first,) = await _commits_after(world, -1)
    assert first["metrics"]["request"]["step_id"] == queued["step_id"]
    for q in Q[1:3]:  # a full batch: hybrid steps on its own as auto does
        world.report("math", q, QUESTIONS[q])
    (second,) = await _commits_after(world, first["step"])
    assert "request" not in second["metrics"]
    await world.runtime.stop()


async def test_a_second_request_while_one_is_queued_is_a_conflict_and_nothing_ready_is_refused(tmp_path):
    world = await started(make_world(tmp_path, mode="manual"))
    with pytest.raises(Conflict, match="nothing to train on"):
        await world.runtime.request_step("math")
    world.report("math", Q[0], QUESTIONS[Q[0]])
    await world.runtime.update_control("math", paused=True)  # paused: the queued request waits
    with pytest.raises(Conflict, match="paused"):
        await world.runtime.request_step("math")
    await world.runtime.update_control("math", paused=False)
    first = await world.runtime.request_step("math")
    with pytest.raises(Conflict, match=first["step_id"]):
        await world.runtime.request_step("math")
    await _commits_after(world, -1)
    await world.runtime.stop()


async def test_pause_stops_auto_steps_until_resumed(tmp_path):
    world = await started(make_world(tmp_path, mode="auto", batch_size=2))
    await world.runtime.update_control("math", paused=True)
    reports = [world.report("math", q, QUESTIONS[q]) for q in Q[:2]]  # a whole batch: auto would step
    await considered(world, reports[-1])
    assert world.commits("math") == [] and world.runtime.status()["scenarios"]["math"]["paused"]

    await world.runtime.update_control("math", paused=False)

    (commit,) = await _commits_after(world, -1)
    assert commit["verdict"] == "published"
    await world.runtime.stop()


async def test_mode_and_pause_survive_a_restart(tmp_path):
    world = await started(make_world(tmp_path, mode="auto"))
    await world.runtime.update_control("math", training_mode="manual", paused=True)
    await world.runtime.stop()

    again = await started(world.restart())

    contract = again.runtime.contract("math")
    assert (contract["training_mode"], contract["paused"]) == ("manual", True)
    await again.runtime.stop()


class Held(FileRecipe):
    """Grows only once `release` is set: a step stays in flight until the test lets it go."""

    release = asyncio.Event()

    async def grow(self, batch: Batch, parent_dir: Any, ctx: Any) -> Any:
        await Held.release.wait()
        return await super().grow(batch, parent_dir, ctx)


async def test_a_request_cut_short_by_a_stop_survives_the_restart_and_runs_once(tmp_path):
    Held.release = asyncio.Event()
    world = await started(make_world(tmp_path, Held, mode="manual"))
    world.report("math", Q[0], QUESTIONS[Q[0]])
    queued = await world.runtime.request_step("math")
    for _ in range(400):  # until the step is growing (held)
        if world.runtime.contract("math")["requested"]["state"] == "running":
            break
        await asyncio.sleep(0.05)
    assert world.runtime.contract("math")["requested"]["state"] == "running"

    await world.runtime.stop()

    assert world.commits("math") == []
    assert world.records.control("math").request["step_id"] == queued["step_id"]
    Held.release = asyncio.Event()
    Held.release.set()
    again = await started(world.restart())
    commits = await _commits_after(again, -1)
    assert [c["metrics"]["request"]["step_id"] for c in commits] == [queued["step_id"]]
    assert again.records.control("math").request is None
    await again.runtime.stop()


async def test_a_request_can_train_from_an_earlier_release_and_hands_its_text_to_the_recipe(tmp_path):
    seen: list[Batch] = []

    class Recording(FileRecipe):
        async def grow(self, batch: Batch, parent_dir: Any, ctx: Any) -> Any:
            seen.append(batch)
            return await super().grow(batch, parent_dir, ctx)

    world = await started(make_world(tmp_path, Recording, mode="manual", policy="always"))
    base = world.releases("math")[0]["release_id"]
    world.report("math", Q[0], QUESTIONS[Q[0]])
    await world.runtime.request_step("math")
    (first,) = await _commits_after(world, -1)
    world.report("math", Q[1], QUESTIONS[Q[1]])

    with pytest.raises(NotFound):
        await world.runtime.request_step("math", release_id="rel_nope")
    await world.runtime.request_step("math", "always answer in digits", release_id=base)
    (second,) = await _commits_after(world, first["step"])

    assert seen[-1].instruction == "always answer in digits"
    assert second["trained_from"] == base and second["parent_release_id"] == first["release_id"]
    assert second["metrics"]["request"]["text"] == "always answer in digits"
    await world.runtime.stop()


async def test_a_recipe_that_does_not_learn_has_nothing_to_control(tmp_path):
    from reef.recipes.basic import BasicRecipe

    world = await started(make_world(tmp_path, BasicRecipe))
    with pytest.raises(Conflict, match="does not learn"):
        await world.runtime.request_step("math")
    with pytest.raises(Conflict, match="does not learn"):
        await world.runtime.update_control("math", training_mode="manual")
    assert world.runtime.contract("math")["learns"] is False
    await world.runtime.stop()


async def test_an_unknown_training_mode_names_the_field(tmp_path):
    world = await started(make_world(tmp_path))
    with pytest.raises(BadRequest) as error:
        await world.runtime.update_control("math", training_mode="sometimes")
    assert error.value.field == "training_mode"
    await world.runtime.stop()
