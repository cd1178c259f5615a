"""Processors receive the recipe's parsed report model: the shape `POST /reef/report` validated is the shape `join`
reads, and a stored report that does not fit it today is skipped by reason, never a crash."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reef.application.runtime import Runtime
from reef.core.records import Record
from reef.core.settings import LearningSettings, Settings, StorageSettings
from reef.learning.recipes_registry import builtin_recipes, load_recipe
from reef.learning.report import Content, read_report
from reef.recipes.grpo import GRPOReport
from reef.recipes.sdpo import SDPOReport
from reef.recipes.sft import SFTReport
from reef.recipes.tttd_grid import GridReport
from tests.fakes.service_app import in_process_edge

_sequence = itertools.count(1)
EXTRA_CONFIG = {"opd": {"teacher": "self"}, "openclawrl": {"judge_function": "tests.fakes.session_judge:rule_judge"}}
# A body no recipe takes today: a score that is not a number (as a record imported as given may hold).
UNREADABLE = {"score": "high", "references": ["i1"]}


def settings(recipe: str, **recipe_config) -> Settings:
    return Settings(learning=LearningSettings(recipe=recipe, batch_size=1, recipe_config=recipe_config))


def record(record_id: str, kind: str, payload: dict) -> Record:
    return dataclasses.replace(Record.new("s", kind, payload, 0.0, agent_record_id=record_id), sequence=next(_sequence))


def chat_inference(record_id: str) -> Record:
    payload = {
        "request": {"messages": [{"role": "user", "content": "2+2?"}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "4"}}]},
        "training": {"prompt_token_ids": [1, 2], "completion_token_ids": [3], "logprobs": [-0.1]},
    }
    return record(record_id, "inference", payload)


def test_a_stored_report_is_read_as_the_model_with_the_records_id_and_without_keys_that_are_no_field() -> None:
    body = {"score": 1.0, "references": ["i1"], "metadata": {"demonstration": {"content": "4"}}, "scenario": "s"}

    report = read_report(SFTReport, "r1", body)

    assert report is not None and report.agent_record_id == "r1"
    assert report.metadata is not None and report.metadata.demonstration == Content(content="4")
    assert report.demonstration(from_feedback=False) == "4"
    assert read_report(SFTReport, "r2", {"metadata": {"demonstration": 4}}) is None


def test_typed_metadata_reads_declared_keys_and_keeps_the_others() -> None:
    cell = read_report(SDPOReport, "r1", {"metadata": {"step": 3, "group": "g", "rollout": 1, "user": "u1"}})
    grouped = read_report(GRPOReport, "r2", {"metadata": {"group": 7}})
    grid = read_report(GridReport, "r3", {"metadata": {"step": 1, "group": 0, "rollout": 0, "parent_id": "seed-0"}})

    assert cell is not None and cell.metadata is not None
    assert cell.metadata.cell() == ("3", "g", 1) and cell.metadata.get("user") == "u1"
    assert grouped is not None and grouped.metadata is not None and grouped.metadata.group == 7
    assert (
        grid is not None
        and grid.metadata is not None
        and (grid.metadata.step, grid.metadata.parent_id)
        == (
            1,
            "seed-0",
        )
    )


@pytest.mark.parametrize(
    "recipe_name", sorted(name for name, recipe in builtin_recipes().items() if recipe.surface.learns)
)
def test_every_builtin_processor_skips_a_stored_report_it_cannot_read_as_unreadable_report(recipe_name: str) -> None:
    recipe = load_recipe(recipe_name, settings(recipe_name, **EXTRA_CONFIG.get(recipe_name, {})))
    processor = recipe.processor()
    assert processor is not None

    processor.ingest(chat_inference("i1"))
    processor.ingest(record("old", "report", UNREADABLE))  # never raises

    assert processor.skipped_counts().get("unreadable_report") == 1
    assert processor.ready() == 0


def test_an_unreadable_report_is_consumed_with_the_next_batch_of_sft() -> None:
    processor = load_recipe("sft", settings("sft")).processor()
    processor.ingest(chat_inference("i1"))
    processor.ingest(record("old", "report", {**UNREADABLE, "metadata": {"demonstration": 4}}))
    processor.ingest(record("r1", "report", {"references": ["i1"], "metadata": {"demonstration": "4"}}))

    batch = processor.build_batch()

    assert batch is not None and batch.samples[0]["completion_text"] == "4"
    assert sorted(batch.record_ids) == ["i1", "old", "r1"]
    assert processor.skipped_counts() == {"unreadable_report": 1}


@pytest.fixture
async def sft(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    configured = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="sft", mode="manual", batch_size=1, poll_interval_s=0.05),
    )
    async for edge in in_process_edge(configured, tmp_path, start=True):
        yield edge


async def test_a_stored_report_an_older_version_wrote_is_skipped_by_the_learner_and_shown_in_status(sft) -> None:
    http, runtime = sft
    headers = {"x-reef-scenario": "support"}
    chat = {"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}]}
    answered = await http.post("/v1/chat/completions", headers=headers, json=chat)
    receipt = answered.headers["x-reef-agent-record-id"]
    older = Record.new("support", "report", {"score": True, "references": [receipt]}, time.time())
    await runtime.records.append_async([older])  # as an older version stored it: a boolean score
    demonstrated = {"references": [receipt], "metadata": {"demonstration": "Paris"}}
    assert (await http.post("/reef/report", headers=headers, json=demonstrated)).status_code == 200

    await runtime.step("support")

    scenario = (await http.get("/reef/status")).json()["scenarios"]["support"]
    assert scenario["skipped"] == {"unreadable_report": 1}
