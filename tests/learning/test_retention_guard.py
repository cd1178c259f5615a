"""The retention guard: the gate judges a candidate on held-out items from earlier lessons too, and refuses one that
forgets an earlier lesson past `evaluation.max_regression`, saying so in the commit and in `/reef/status`."""

from __future__ import annotations

import json
import time

from reef.core.records import Record
from reef.learning.evaluation.retention import check_retention, retention_set
from reef.learning.evaluation.tasks import Task
from tests.fakes.learning_recipe import CitingDemoRecipe, DemoRecipe
from tests.fakes.learning_world import make_settings, open_world, report_id, started
from tests.fakes.training_backend import FakeTrainingBackend

FIRST = {f"what is {n} + {n}?": str(2 * n) for n in range(1, 5)}
SECOND = {f"what is {n} times {n}?": str(n * n) for n in range(5, 9)}


def teach(world, lesson: dict[str, str], taken: set[str], name: str | None = None, scenario: str = "math") -> None:
    """Each question of `lesson` asked twice, with the answer demonstrated: once held out, once to train on."""
    for held_out in (True, False):
        for prompt, answer in lesson.items():
            request = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
            (inference,) = world.records.append(
                [Record.new(scenario, "inference", {"dialect": "chat", "request": request}, created_at=time.time())]
            )
            metadata = {"demonstration": answer, **({"lesson": name} if name else {})}
            payload = {"references": [inference.agent_record_id], "metadata": metadata}
            rid = report_id(held_out, taken)
            world.records.append([Record.new(scenario, "report", payload, created_at=time.time(), agent_record_id=rid)])
    world.runtime.notify(scenario)


def make_world_with_retention(tmp_path, backend: FakeTrainingBackend | None = None, retention_items: int = 64):
    """A world whose gate judges on the held-out split (no tasks of its own), four reports a batch; rehearsal off,
    so that the guard alone stands between a forgetful candidate and the release."""
    settings = make_settings(tmp_path, tasks=None, batch_size=4)
    settings = settings.model_copy(
        update={
            "evaluation": settings.evaluation.model_copy(update={"retention_items": retention_items}),
            "learning": settings.learning.model_copy(update={"rehearsal_share": 0.0}),
        }
    )
    return open_world(tmp_path, settings, CitingDemoRecipe, backend)


async def two_lessons(tmp_path, forget: frozenset[str], retention_items: int = 64):
    """A world that learnt FIRST (published), then trains SECOND with a backend that forgets `forget`."""
    backend = FakeTrainingBackend()
    world = await started(make_world_with_retention(tmp_path, backend, retention_items))
    taken: set[str] = set()
    teach(world, FIRST, taken)
    first = await world.runtime.step("math")
    assert first["verdict"] == "published", first["reason"]
    backend.forget = forget
    teach(world, SECOND, taken)
    return world, await world.runtime.step("math")


async def test_a_candidate_that_forgets_an_earlier_lesson_is_refused_and_status_and_the_commit_say_why(tmp_path):
    world, commit = await two_lessons(tmp_path, forget=frozenset(list(FIRST)[:2]))

    # On the whole held-out split it wins (4 new answers, 2 forgotten), but it loses half of the first lesson.
    assert commit["candidate_scores"] == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert commit["verdict"] == "rejected" and "retention" in commit["reason"] and "refused" in commit["reason"]
    retention = commit["metrics"]["retention"]
    assert retention["refused"] is True and retention["tasks"] == 4 and retention["losses"] == 2
    assert retention["regression"] == 0.5 and retention["max_regression"] == 0.05
    status = world.runtime.status()["scenarios"]["math"]
    assert status["last_commit"]["retention"]["refused"] is True and "refused" in status["last_commit"]["reason"]
    assert status["gate"]["retention"] == {
        "items": 4, "earlier_items": 4, "retention_items": 64, "max_regression": 0.05
    }  # fmt: skip
    assert len(world.releases("math")) == 2  # the base and the first lesson's release: nothing new serves
    await world.runtime.stop()


async def test_tasks_posted_lesson_by_lesson_through_the_api_guard_the_earlier_lessons_too(tmp_path):
    backend = FakeTrainingBackend()
    settings = make_settings(tmp_path, tasks=None, batch_size=4)
    evaluation = settings.evaluation.model_copy(update={"retention_items": 64})
    settings = settings.model_copy(update={"evaluation": evaluation})
    world = await started(open_world(tmp_path, settings, DemoRecipe, backend))
    for name, lesson in ((1, FIRST), (2, SECOND)):
        rows = [{"prompt": q, "checker": "exact", "answer": a, "lesson": name} for q, a in lesson.items()]
        await world.runtime.add_tasks("math", json.dumps({"tasks": rows}).encode())
        for prompt, answer in lesson.items():
            world.report("math", prompt, answer)
        commit = await world.runtime.step("math")
        backend.forget = frozenset(list(FIRST)[:2])

    assert commit["verdict"] == "rejected" and "refused" in commit["reason"]
    assert commit["metrics"]["retention"]["tasks"] == 4 and commit["metrics"]["retention"]["losses"] == 2
    assert world.runtime.status()["scenarios"]["math"]["gate"]["retention"]["lessons"] == {"1": 4}
    await world.runtime.stop()


async def test_a_candidate_that_keeps_both_lessons_is_published(tmp_path):
    world, commit = await two_lessons(tmp_path, forget=frozenset())

    assert commit["verdict"] == "published", commit["reason"]
    assert commit["metrics"]["retention"]["refused"] is False and commit["metrics"]["retention"]["tasks"] == 4
    await world.runtime.stop()


async def test_with_retention_items_0_the_gate_judges_as_before(tmp_path):
    world, commit = await two_lessons(tmp_path, forget=frozenset(list(FIRST)[:2]), retention_items=0)

    assert commit["verdict"] == "published", commit["reason"]
    assert "retention" not in commit["metrics"] and "retention" not in commit["reason"]
    assert world.runtime.status()["scenarios"]["math"]["gate"]["retention"]["items"] == 0
    await world.runtime.stop()


async def test_reports_that_name_their_lesson_show_the_retention_set_by_lesson(tmp_path):
    world = await started(make_world_with_retention(tmp_path))
    taken: set[str] = set()
    teach(world, FIRST, taken, name="sums")
    await world.runtime.step("math")
    teach(world, SECOND, taken, name="squares")
    after_first = world.runtime.status()["scenarios"]["math"]["gate"]["retention"]
    second = await world.runtime.step("math")

    assert after_first["lessons"] == {"sums": 4}  # the squares arrived after the serving release was published
    assert second["verdict"] == "published", second["reason"]
    after_second = world.runtime.status()["scenarios"]["math"]["gate"]["retention"]
    assert after_second["lessons"] == {"sums": 4, "squares": 4} and after_second["items"] == 8
    await world.runtime.stop()


async def test_the_retention_set_is_the_same_after_a_restart(tmp_path):
    world, _ = await two_lessons(tmp_path, forget=frozenset(list(FIRST)[:2]))
    before = [t.task_id for t in world.runtime.gate_tasks("math").tasks]
    shown = world.runtime.status()["scenarios"]["math"]["gate"]["retention"]
    await world.runtime.stop()

    world = world.restart()
    await world.runtime.start()
    await world.runtime.step("math")  # nothing to train on: it resumes and reads the held-out split again

    assert [t.task_id for t in world.runtime.gate_tasks("math").tasks] == before
    assert world.runtime.status()["scenarios"]["math"]["gate"]["retention"] == shown
    await world.runtime.stop()


def held(task_id: str, at: float, lesson: str | None = None) -> Task:
    extra = {"added_at": at, **({"lesson": lesson} if lesson else {})}
    return Task(task_id, [{"role": "user", "content": task_id}], "exact", answer="x", extra=extra)


def test_the_retention_set_keeps_each_earlier_lesson_its_share_spread_over_time():
    tasks = [held(f"a{i}", i, "1") for i in range(12)] + [held(f"b{i}", 100 + i, "2") for i in range(3)]
    tasks += [held("late", 500, "3"), Task("file", [{"role": "user", "content": "?"}], "exact", answer="x")]

    chosen = retention_set(tasks, serving_since=200, limit=7)

    assert chosen.earlier == 15 and len(chosen.positions) == 7
    assert chosen.task_ids == ("a1", "a4", "a7", "a10", "b0", "b1", "b2")  # lesson 2 whole, lesson 1 spread
    assert chosen.to_json()["lessons"] == {"1": 4, "2": 3}
    assert retention_set(tasks, serving_since=None, limit=7).positions == ()
    assert retention_set(tasks, serving_since=200, limit=0).positions == ()


def test_the_guard_refuses_only_a_loss_beyond_max_regression_and_one_standard_error():
    chosen = retention_set([held(f"a{i}", i) for i in range(8)], serving_since=10, limit=8)
    one_lost = check_retention([0.0] + [1.0] * 7, [1.0] * 8, chosen, max_regression=0.05)
    three_lost = check_retention([0.0] * 3 + [1.0] * 5, [1.0] * 8, chosen, max_regression=0.05)

    assert one_lost is not None and not one_lost.refused
    assert three_lost is not None and three_lost.refused and three_lost.summary["losses"] == 3
    assert check_retention([1.0] * 3, [1.0] * 3, chosen, 0.05) is None  # the scores do not cover the set
