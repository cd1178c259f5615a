"""The `tttd` recipe on the learning loop: real SQLite, real git releases, the real commit log, a fake backend.

A step's grid of attempts (reports citing captured rollouts) becomes one release whose archive holds the step; the
archive rides in the release, so a crash before the publish leaves it as committed and a resume replays the grid.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.discovery.search import read_archive
from reef.recipes.tttd import TTTDRecipe
from reef.recipes.tttd_mean import TTTDMeanRecipe
from tests.fakes.learning_world import Crash, World, consumed_steps, crash_at, make_settings, open_world, started
from tests.fakes.policy_backend import PolicyBackend

SCENARIO = "pack"
# Two circles: the seed (two radii of 0.25) sums to 0.5.
BETTER = "[[0.3,0.3,0.3],[0.75,0.75,0.25]]"
WORSE = "[[0.2,0.5,0.2],[0.8,0.5,0.2]]"


def _world(root: Path, recipe: type[TTTDRecipe] = TTTDRecipe, **config: Any) -> World:
    settings = make_settings(root, tasks=None)
    options = {"problem": "circle-packing", "problem_options": {"n": 2}, "groups": 2, "rollouts": 2}
    learning = settings.learning.model_copy(update={"recipe": recipe.name, "recipe_config": {**options, **config}})
    settings = settings.model_copy(update={"learning": learning})
    return open_world(root, settings, recipe, PolicyBackend())


def _head_archive(world: World) -> dict[str, Any]:
    head = world.runtime.release_store.head(SCENARIO)
    assert head is not None
    archive = read_archive(world.runtime.release_store.materialize(head))
    assert archive is not None
    return archive.to_json()


def _attempt(world: World, step: int, group: int, rollout: int, parent: str, solution: str | None) -> list[Record]:
    """A captured rollout served by the head release and the report scoring it (validated as the route does)."""
    head = world.runtime.release_store.head(SCENARIO)
    training = {"prompt_token_ids": [1, 2], "completion_token_ids": [3, 4], "logprobs": [-0.5, -0.7]}
    payload = {"request": {"messages": []}, "release_id": head.release_id if head else None, "training": training}
    inference = Record.new(SCENARIO, "inference", payload, created_at=time.time())
    score = 0.0 if solution is None else sum(c[2] for c in json.loads(solution))
    meta = {"step": step, "group": group, "rollout": rollout, "parent_id": parent, "solution": solution}
    report = {"score": score, "references": [inference.agent_record_id], "metadata": meta}
    world.runtime.validate_report(SCENARIO, report)
    stored = world.records.append([inference, Record.new(SCENARIO, "report", report, created_at=time.time())])
    world.runtime.notify(SCENARIO)
    return stored


def _grid(world: World, step: int, parent: str, solutions: list[str | None]) -> list[Record]:
    return [r for i, s in enumerate(solutions) for r in _attempt(world, step, i // 2, i % 2, parent, s)]


async def test_a_new_discovery_scenario_starts_from_its_evaluated_seed(tmp_path: Path) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    view = await world.runtime.archive(SCENARIO, 10)
    (seed,) = view["entries"]
    assert seed["entry_id"] == "seed-0" and seed["valid"] and seed["score"] == pytest.approx(0.5)
    following = await world.runtime.archive_next(SCENARIO, 2)
    assert following["step"] == 1 and following["rollouts"] == 2
    assert [p["parent_id"] for p in following["parents"]] == ["seed-0", "seed-0"]
    assert "[[0.25,0.5,0.25],[0.75,0.5,0.25]]" in following["parents"][0]["prompt"]
    await world.runtime.stop()


async def test_the_processor_waits_for_the_whole_grid_then_a_release_carries_the_step(tmp_path: Path) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    _grid(world, 1, "seed-0", [BETTER, WORSE, WORSE])
    assert await world.runtime.step(SCENARIO) is None  # three of four cells
    _attempt(world, 1, 1, 1, "seed-0", None)
    commit = await world.runtime.step(SCENARIO)
    assert commit is not None and commit["verdict"] == "published"
    archive = _head_archive(world)
    assert archive["step"] == 1 and archive["total_visits"] == 4
    best = max(archive["entries"], key=lambda e: e["reward"])
    assert best["solution"] == BETTER and best["parent_id"] == "seed-0"
    (job,) = world.backend.jobs  # type: ignore[attr-defined]
    assert job.recipe_config.kl_coef == 0.1 and len(job.samples) == 4
    assert all("attempt" not in s and math.isfinite(s["advantage"]) for s in job.samples)
    assert (await world.runtime.archive_next(SCENARIO, 2))["step"] == 2
    await world.runtime.stop()


async def test_a_constant_reward_grid_trains_nothing_but_counts_its_visits(tmp_path: Path) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    _grid(world, 1, "seed-0", [None, None, None, None])
    commit = await world.runtime.step(SCENARIO)
    assert commit is not None and commit["verdict"] == "published"
    assert world.backend.jobs == []  # type: ignore[attr-defined]
    archive = _head_archive(world)
    assert archive["step"] == 1 and archive["total_visits"] == 4 and len(archive["entries"]) == 1
    await world.runtime.stop()


async def test_the_frozen_control_grows_the_archive_without_training(tmp_path: Path) -> None:
    world = await started(_world(tmp_path, TTTDMeanRecipe, train=False), SCENARIO)
    _grid(world, 1, "seed-0", [BETTER, WORSE, WORSE, None])
    assert (await world.runtime.step(SCENARIO) or {})["verdict"] == "published"
    assert world.backend.jobs == []  # type: ignore[attr-defined]
    assert _head_archive(world)["step"] == 1
    await world.runtime.stop()


async def test_a_crash_between_the_candidate_and_its_publish_leaves_the_archive_as_committed(tmp_path: Path) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    before = _head_archive(world)
    reports = [r for r in _grid(world, 1, "seed-0", [BETTER, WORSE, WORSE, None]) if r.request_type == "report"]
    world.runtime.release_store._fault_hook = crash_at("before-ref-update")  # type: ignore[attr-defined]
    with pytest.raises(Crash):
        await world.runtime.step(SCENARIO)
    assert _head_archive(world) == before

    world = world.restart()  # resuming continues the search: the grid is replayed once
    await world.runtime.start()
    commit = await world.runtime.step(SCENARIO)
    assert commit is not None and commit["verdict"] == "published"
    archive = _head_archive(world)
    assert archive["step"] == 1 and archive["total_visits"] == 4
    assert all(consumed_steps(world, SCENARIO)[r.agent_record_id] == commit["step"] for r in reports)
    assert await world.runtime.step(SCENARIO) is None
    await world.runtime.stop()


async def test_reports_outside_the_grid_or_with_bad_attempts_are_refused_naming_the_field(tmp_path: Path) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    good = {"step": 1, "group": 0, "rollout": 0, "parent_id": "seed-0", "solution": BETTER}
    cases = [
        ({"score": 1.0, "metadata": {**good, "group": 2}}, "metadata.group"),
        ({"score": 1.0, "metadata": {**good, "rollout": -1}}, "metadata.rollout"),
        ({"score": 1.0, "metadata": {**good, "step": 0}}, "metadata.step"),
        ({"score": 1.0, "metadata": {**good, "solution": "[[0.25, 0.25"}}, "metadata.solution"),
        ({"score": math.nan, "metadata": good}, "score"),
        ({"score": math.inf, "metadata": good}, "score"),
        ({"score": 1.0, "metadata": {**good, "parent_id": ""}}, "metadata.parent_id"),
        ({"metadata": good}, "score"),
        ({"score": 1.0, "metadata": {"parent_id": "seed-0"}}, "metadata.step"),
    ]
    for report, field in cases:
        with pytest.raises(BadRequest) as refused:
            world.runtime.validate_report(SCENARIO, {"references": ["rec_x"], **report})
        assert refused.value.field == field
    await world.runtime.stop()


async def test_a_report_that_claims_no_grid_cell_is_accepted_and_skipped_without_touching_the_grid(
    tmp_path: Path,
) -> None:
    world = await started(_world(tmp_path), SCENARIO)
    head = world.runtime.release_store.head(SCENARIO)
    training = {"prompt_token_ids": [1, 2], "completion_token_ids": [3, 4], "logprobs": [-0.5, -0.7]}
    payload = {"request": {"messages": []}, "release_id": head.release_id if head else None, "training": training}
    inference = Record.new(SCENARIO, "inference", payload, created_at=time.time())
    for report in ({"score": 1.0, "references": [inference.agent_record_id]}, {"feedback": "looks good"}):
        world.runtime.validate_report(SCENARIO, report)
    world.records.append(
        [
            inference,
            Record.new(
                SCENARIO, "report", {"score": 1.0, "references": [inference.agent_record_id]}, created_at=time.time()
            ),
        ]
    )
    assert await world.runtime.step(SCENARIO) is None
    status = world.runtime.status()["scenarios"][SCENARIO]
    assert status["skipped"] == {"not_a_grid_cell": 1} and status["ready"] == 0
    await world.runtime.stop()
