"""Rehearsal: a share of each batch is earlier published samples replayed, never consumed again, from a bounded
reservoir that is the same after a restart."""

from __future__ import annotations

import random
import time
from typing import Any

from reef.core.records import Record
from reef.core.settings import Settings
from reef.learning.base import Batch
from reef.learning.rehearsal import Rehearsal, Reservoir, replay_count
from reef.recipes.grpo import GRPORecipe
from reef.recipes.sft import SFTRecipe
from tests.fakes.learning_recipe import CitingDemoRecipe, DemoRecipe, ReplayableDemoRecipe
from tests.fakes.learning_world import QUESTIONS, World, consumed_steps, make_settings, open_world, started
from tests.fakes.training_backend import FakeTrainingBackend

Q = list(QUESTIONS)


def rehearsing(settings: Settings, share: float, max_items: int = 512) -> Settings:
    learning = settings.learning.model_copy(update={"rehearsal_share": share, "rehearsal_max_items": max_items})
    return settings.model_copy(update={"learning": learning})


async def world_of(tmp_path, share: float, max_items: int = 512, recipe=ReplayableDemoRecipe, backend=None) -> World:
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = rehearsing(make_settings(tmp_path), share, max_items)
    return await started(open_world(tmp_path, settings, recipe, backend))


async def teach(world: World, questions: list[str]) -> dict[str, Any]:
    """Report the right answers to `questions` and run one step on them; its commit."""
    for question in questions:
        world.report("math", question, QUESTIONS[question])
    commit = await world.runtime.step("math")
    assert commit is not None
    return commit


def rehearsal_of(world: World) -> Rehearsal:
    rehearsal = Rehearsal.of("math", world.runtime.recipe, world.settings, world.records, world.runtime.commit_log)
    assert rehearsal is not None
    return rehearsal


def test_the_replay_makes_the_configured_share_of_the_batch():
    assert replay_count(8, 0.0) == 0
    assert replay_count(4, 0.5) == 4
    assert replay_count(6, 0.25) == 2
    assert replay_count(0, 0.5) == 0


async def test_a_later_batch_replays_earlier_published_samples_in_the_configured_share(tmp_path):
    world = await world_of(tmp_path, share=0.5)
    first = await teach(world, Q[:2])
    second = await teach(world, Q[2:])

    assert first["verdict"] == second["verdict"] == "published"
    job = world.backend.jobs[1]
    assert {sample["record_id"] for sample in job.samples} == set(second["consumed_record_ids"])
    assert {sample["record_id"] for sample in job.replayed} == set(first["consumed_record_ids"])
    assert second["metrics"]["rehearsal_samples"] == 2


async def test_replayed_records_are_never_consumed_again(tmp_path):
    world = await world_of(tmp_path, share=0.5)
    first = await teach(world, Q[:2])
    second = await teach(world, Q[2:])

    assert set(second["consumed_record_ids"]).isdisjoint(first["consumed_record_ids"])
    steps = consumed_steps(world)
    assert {steps[record_id] for record_id in first["consumed_record_ids"]} == {first["step"]}
    assert {steps[record_id] for record_id in second["consumed_record_ids"]} == {second["step"]}


async def test_a_share_of_zero_trains_exactly_the_batches_of_a_recipe_that_does_not_rehearse(tmp_path):
    off = await world_of(tmp_path / "off", share=0.0)
    plain = await world_of(tmp_path / "plain", share=0.5, recipe=DemoRecipe)
    for world in (off, plain):
        await teach(world, Q[:2])
        await teach(world, Q[2:])

    def questions(world: World) -> list[list[str]]:
        return [[sample["prompt"] for sample in [*job.samples, *job.replayed]] for job in world.backend.jobs]

    assert questions(off) == questions(plain) == [Q[:2], Q[2:]]


class SecondJobWrong(FakeTrainingBackend):
    """Learns wrong answers in its second job only."""

    def run(self, job, progress=None):
        self.corrupt = len(self.jobs) == 1
        return super().run(job, progress)


async def test_a_rejected_candidates_samples_are_never_replayed(tmp_path):
    world = await world_of(tmp_path, share=0.5, backend=SecondJobWrong())
    published = await teach(world, Q[:2])
    rejected = await teach(world, Q[:2])
    await teach(world, Q[2:])

    assert (published["verdict"], rejected["verdict"]) == ("published", "rejected")
    replayed = {sample["record_id"] for sample in world.backend.jobs[2].replayed}
    assert replayed == set(published["consumed_record_ids"])


def test_the_reservoir_is_bounded_and_the_same_whatever_order_it_is_offered_in():
    ids = [f"record-{n}" for n in range(500)]
    forwards, shuffled = Reservoir("math", 16), Reservoir("math", 16)
    for record_id in ids:
        forwards.offer(record_id)
    for record_id in random.Random(7).sample(ids, len(ids)):
        shuffled.offer(record_id)
        shuffled.offer(record_id)

    assert len(forwards.items()) == 16
    assert forwards.items() == shuffled.items()
    assert Reservoir("other", 16).items() == [] and len(set(forwards.items())) == 16


async def test_a_bounded_store_replays_no_more_than_it_holds(tmp_path):
    world = await world_of(tmp_path, share=0.5, max_items=1)
    first = await teach(world, Q[:2])
    await teach(world, Q[2:])

    replayed = [sample["record_id"] for sample in world.backend.jobs[1].replayed]
    assert len(replayed) == 1 and replayed[0] in first["consumed_record_ids"]
    assert len(rehearsal_of(world).held()) == 1


async def test_after_a_restart_the_replay_set_is_the_same(tmp_path):
    world = await world_of(tmp_path, share=0.5, max_items=3)
    await teach(world, Q[:2])
    third = await teach(world, Q[2:])
    before = rehearsal_of(world)
    probe = Batch("probe", [{}, {}], [])
    expected = before.replay(probe, third["step"] + 1)
    await world.runtime.stop()

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    assert rehearsal_of(world).held() == before.held()
    await teach(world, [Q[0], Q[1]])

    (job,) = world.backend.jobs
    assert len(expected) == 2 and sorted(job.replayed, key=str) == sorted(expected, key=str)


async def test_each_replayed_sample_is_trained_the_configured_passes_at_most_once_an_epoch(tmp_path):
    settings = rehearsing(make_settings(tmp_path), 0.5)
    for passes, epochs, trained in ((2, 4, 2), (3, 2, 2), (1, 4, 1)):
        learning = settings.learning.model_copy(update={"rehearsal_passes": passes})
        training = settings.training.model_copy(update={"epochs": epochs})
        world = await started(
            open_world(tmp_path / f"{passes}-{epochs}", settings.model_copy(update={"learning": learning,
                       "training": training}), ReplayableDemoRecipe)
        )  # fmt: skip
        first = await teach(world, Q[:2])
        await teach(world, Q[2:])
        replayed = [sample["record_id"] for sample in world.backend.jobs[1].replayed]
        assert sorted(replayed) == sorted(trained * first["consumed_record_ids"])
        assert world.backend.jobs[1].samples and len(replayed) == 2 * trained


def test_sft_rehearses_and_on_policy_recipes_do_not(tmp_path):
    settings = make_settings(tmp_path)
    assert SFTRecipe(settings).processor().replayable
    assert not GRPORecipe(settings).processor().replayable


def ask_and_demonstrate(world: World, question: str) -> None:
    """An answered chat request and a report citing it with the right answer, as `sft` takes them."""
    request = {"model": "m", "messages": [{"role": "user", "content": question}]}
    (inference,) = world.records.append(
        [Record.new("math", "inference", {"dialect": "chat", "request": request}, created_at=time.time())]
    )
    payload = {"references": [inference.agent_record_id], "metadata": {"demonstration": QUESTIONS[question]}}
    world.records.append([Record.new("math", "report", payload, created_at=time.time())])


async def test_an_sft_report_is_replayed_with_the_consumed_inference_it_cites(tmp_path):
    world = await world_of(tmp_path, share=0.5, recipe=CitingDemoRecipe)
    commits = []
    for questions in (Q[:2], Q[2:]):
        for question in questions:
            ask_and_demonstrate(world, question)
        commits.append(await world.runtime.step("math"))

    first, second = commits
    assert [commit["verdict"] for commit in commits] == ["published", "published"]
    replayed = world.backend.jobs[1].replayed
    assert sorted(sample["prompt"] for sample in replayed) == sorted(Q[:2])
    assert {sample["record_id"] for sample in replayed} < set(first["consumed_record_ids"])
    steps = consumed_steps(world)
    assert {steps[record_id] for record_id in first["consumed_record_ids"]} == {first["step"]}
