"""`GET /reef/status` counts, per scenario, the reports its recipe could not learn from, by reason."""

from __future__ import annotations

import time

from reef.core.records import Record
from reef.core.settings import LearningSettings, Settings
from reef.learning.recipes_registry import load_recipe
from tests.fakes.learning_recipe import CitingDemoRecipe
from tests.fakes.learning_world import make_world, started


def ask_and_report(world, metadata, scenario="math"):
    request = {"model": "m", "messages": [{"role": "user", "content": "2+2?"}]}
    (inference,) = world.records.append(
        [Record.new(scenario, "inference", {"dialect": "chat", "request": request}, created_at=time.time())]
    )
    payload = {"references": [inference.agent_record_id], "metadata": metadata}
    world.records.append([Record.new(scenario, "report", payload, created_at=time.time(), agent_record_id="rep-1")])
    world.runtime.notify(scenario)


async def test_status_counts_the_reports_a_scenario_skipped_by_reason(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    assert world.runtime.status()["scenarios"]["math"]["skipped"] == {}

    ask_and_report(world, {"note": "no demonstration here"})
    await world.runtime.step("math")

    assert world.runtime.status()["scenarios"]["math"]["skipped"] == {"unusable": 1}


def test_an_rl_report_on_an_answer_recorded_without_tokens_is_counted_as_no_training_capture():
    settings = Settings(learning=LearningSettings(recipe="rl", batch_size=1))
    processor = load_recipe("rl", settings).processor()
    request = {"model": "m", "messages": [{"role": "user", "content": "2+2?"}]}
    answer = Record.new("s", "inference", {"dialect": "chat", "request": request}, created_at=0.0, agent_record_id="i1")
    processor.ingest(answer)
    processor.ingest(Record.new("s", "report", {"references": ["i1"], "score": 1.0}, created_at=0.0))
    assert processor.skipped_counts() == {"no_training_capture": 1}
