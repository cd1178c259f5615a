"""The runtime facade: scenarios, contexts, releases, rollback/promote, restarts and status."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from reef.application.runtime import Runtime
from reef.core.errors import BadRequest, Conflict, NotFound
from reef.core.settings import Settings, StorageSettings
from reef.releases import FileCommitLog, open_release_store
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine
from tests.fakes.learning_recipe import FileRecipe
from tests.fakes.learning_world import QUESTIONS, make_world

Q = list(QUESTIONS)


async def trained(world, scenario="math"):
    await world.runtime.start()
    await world.runtime.ensure_scenario(scenario)
    for q in Q[:2]:
        world.report(scenario, q, QUESTIONS[q])
    return await world.runtime.step(scenario)


async def test_many_concurrent_first_requests_create_a_scenario_once(tmp_path):
    world = make_world(tmp_path)
    await world.runtime.start()
    assert not world.runtime.known_scenario("new")

    results = await asyncio.gather(*(world.runtime.ensure_scenario("new") for _ in range(20)))

    assert [created for _, created in results].count(True) == 1
    assert {info.name for info, _ in results} == {"new"}
    assert world.runtime.known_scenario("new")
    (base,) = world.releases("new")
    assert base["operation"] == "creation" and base["current"]
    assert world.engine.activations == [("new", base["release_id"])]


async def test_a_scenario_created_with_an_unknown_release_id_is_refused(tmp_path):
    world = make_world(tmp_path)
    await world.runtime.start()
    await world.runtime.ensure_scenario("math")
    with pytest.raises(NotFound):
        await world.runtime.ensure_scenario("math", release_id="0" * 40)
    base = world.releases("math")[0]["release_id"]
    info, created = await world.runtime.ensure_scenario("math", release_id=base)
    assert info.name == "math" and not created


async def test_a_deleted_scenario_is_unknown_and_can_be_created_afresh(tmp_path):
    world = make_world(tmp_path)
    await world.runtime.start()
    await world.runtime.ensure_scenario("gone")
    await world.runtime.delete_scenario("gone")

    assert not world.runtime.known_scenario("gone")
    assert world.engine.active_release_id("gone") is None
    with pytest.raises(NotFound):
        world.releases("gone")
    with pytest.raises(NotFound):
        await world.runtime.delete_scenario("gone")
    with pytest.raises(NotFound):
        await world.runtime.delete_scenario("never-existed")

    _, created = await world.runtime.ensure_scenario("gone")
    assert created and len(world.releases("gone")) == 1


async def test_a_pinned_release_is_served_from_its_files_and_an_unknown_one_is_not_found(tmp_path):
    world = make_world(tmp_path)
    commit = await trained(world)
    base = world.releases("math")[-1]["release_id"]

    serving = world.runtime.context_for("math", None)
    assert serving.release_id is None and serving.candidate_path is None
    assert world.runtime.context_for("math", commit["release_id"]).candidate_path is None
    pinned = world.runtime.context_for("math", base)
    assert pinned.release_id == base and pinned.candidate_path is not None and pinned.candidate_path.is_dir()
    with pytest.raises(NotFound):
        world.runtime.context_for("math", "f" * 40)


async def test_rollback_serves_an_earlier_release_as_a_new_one(tmp_path):
    world = make_world(tmp_path)
    commit = await trained(world)
    base = world.releases("math")[-1]["release_id"]

    rolled = await world.runtime.rollback("math", base)

    assert rolled.operation == "rollback" and rolled.parent_release_id == commit["release_id"]
    assert world.engine.active_release_id("math") == rolled.release_id
    assert world.releases("math")[0]["current"]
    with pytest.raises(Conflict):
        await world.runtime.rollback("math", rolled.release_id)
    with pytest.raises(Conflict):
        await world.runtime.promote("math", base)
    with pytest.raises(NotFound):
        await world.runtime.rollback("math", "a" * 40)


async def test_after_a_rollback_the_learner_builds_on_the_restored_release(tmp_path):
    world = make_world(tmp_path)
    await trained(world)
    base = world.releases("math")[-1]["release_id"]
    rolled = await world.runtime.rollback("math", base)
    for q in Q[2:]:
        world.report("math", q, QUESTIONS[q])
    commit = await world.runtime.step("math")
    assert commit["verdict"] == "published" and commit["parent_release_id"] == rolled.release_id


async def test_a_restart_serves_every_scenarios_head_again(tmp_path):
    world = make_world(tmp_path)
    commit = await trained(world)
    await world.runtime.ensure_scenario("other")
    await world.runtime.stop()

    world = world.restart()
    assert not world.runtime.known_scenario("math")
    await world.runtime.start()

    assert world.runtime.known_scenario("math") and world.runtime.known_scenario("other")
    assert world.engine.active_release_id("math") == commit["release_id"]
    assert world.commits("math", 1, 10) == []
    assert [c["step"] for c in world.commits("math", -1, 10)] == [1]


async def test_reports_are_validated_by_the_recipe(tmp_path):
    world = make_world(tmp_path)
    with pytest.raises(BadRequest) as refused:
        world.runtime.validate_report("math", {"feedback": "great"})
    assert refused.value.field == "feedback"
    world.runtime.validate_report("math", {"feedback": {"prompt": "p", "answer": "a"}})


async def test_a_recipe_that_learns_nothing_serves_without_a_learner(tmp_path):
    from reef.learning.base import Recipe
    from reef.learning.surface import NO_SURFACE

    class RecordsOnly(Recipe):
        name = "records-only"
        surface = NO_SURFACE

        def processor(self):
            return None

    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"))
    runtime = Runtime(
        settings,
        open_record_store("sqlite", directory=tmp_path / "records"),
        open_release_store(str(tmp_path / "releases.git"), tmp_path / "work"),
        FileCommitLog(tmp_path / "commits"),
        DictEngine(),
        recipe=RecordsOnly(settings),
    )
    await runtime.start()
    await runtime.ensure_scenario("plain")
    runtime.notify("plain")
    assert await runtime.step("plain") is None
    assert runtime.status()["scenarios"]["plain"]["learning"] is False
    assert runtime.status()["learning"]["enabled"] is False


async def test_a_harness_scenario_gives_the_engine_its_release_system_prompt(tmp_path, monkeypatch):
    rules = dataclasses.replace(FileRecipe.surface, render=lambda recipe, path: ((path / "rules.md").read_text(), ()))
    monkeypatch.setattr(FileRecipe, "surface", rules)
    world = make_world(tmp_path, recipe_cls=FileRecipe)
    await world.runtime.start()
    await world.runtime.ensure_scenario("agent")
    assert world.runtime.context_for("agent", None).system_prompt == "Answer briefly.\n"
