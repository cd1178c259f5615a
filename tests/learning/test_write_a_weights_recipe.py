"""The weights example of docs/developer/write-a-recipe.md (`filtered_sft`) runs as the page shows it, trains with
the deployment's `training.*` settings and gets the held-out gate; what an author can get wrong exits 2 at start."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

from reef.application import startup
from reef.application.config import ConfigError
from reef.core.capabilities import Capability
from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.core.settings import InferenceSettings, LearningSettings, Settings, TrainingSettings
from reef.learning.base import Batch, GrowContext
from reef.learning.recipes_registry import load_recipe, recipe_class
from reef.learning.report import parse_report
from tests.fakes.dict_engine import DictEngine
from tests.fakes.policy_backend import PolicyBackend

ROOT = Path(__file__).resolve().parents[2]
DOTTED = "tests.examples.filtered_sft:FilteredSFT"
_sequence = itertools.count(1)


def configured(recipe: str = DOTTED, model: Path | None = None, **recipe_config: object) -> Settings:
    return Settings(
        inference=InferenceSettings(backend="local", model_path=str(model) if model else None),
        learning=LearningSettings(recipe=recipe, batch_size=1, recipe_config=recipe_config),
        training=TrainingSettings(lora_rank=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
    )


def cited(record_id: str) -> Record:
    payload = {"request": {"messages": [{"role": "user", "content": "2+2?"}]}, "response": {}}
    return dataclasses.replace(Record.new("s", "inference", payload, 0.0, record_id), sequence=next(_sequence))


def scored(record_id: str, score: float, demonstration: str | None = "4") -> Record:
    payload = {"references": ["i1"], "score": score, "metadata": {"demonstration": demonstration}}
    return dataclasses.replace(Record.new("s", "report", payload, 0.0, record_id), sequence=next(_sequence))


def test_the_page_shows_the_weights_example_as_it_is() -> None:
    page = (ROOT / "docs" / "developer" / "write-a-recipe.md").read_text()
    shown = re.search(r"```python\n(\"\"\"`filtered_sft`.*?)```", page, re.S)
    assert shown is not None
    assert shown.group(1) == (ROOT / "tests" / "examples" / "filtered_sft.py").read_text()


def test_only_reports_scored_at_least_min_score_become_training_samples_the_rest_are_skipped_by_reason() -> None:
    processor = load_recipe(DOTTED, configured(min_score=0.5)).processor()
    processor.ingest(cited("i1"))
    for record in (scored("r1", 0.9), scored("r2", 0.2), scored("r3", 1.0, demonstration=None)):
        processor.ingest(record)
    batch = processor.build_batch()
    assert batch is not None and batch.samples == [
        {"messages": [{"role": "user", "content": "2+2?"}], "completion_text": "4"}
    ]
    assert processor.skipped_counts() == {"below_min_score": 1, "no_demonstration": 1}


def test_a_malformed_demonstration_is_a_400_naming_the_field_and_a_report_without_one_is_well_formed() -> None:
    recipe = load_recipe(DOTTED, configured())
    with pytest.raises(BadRequest) as refused:
        parse_report(recipe, {"score": 1.0, "metadata": {"demonstration": 4}})
    assert refused.value.field == "metadata.demonstration"
    assert parse_report(recipe, {"score": 0.1, "feedback": "meh"}).score == 0.1
    assert "min_score" in recipe.report_model.json_schema(recipe)["description"]


def test_a_held_out_report_becomes_a_gate_task_and_is_never_trained_on() -> None:
    processor = load_recipe(DOTTED, configured()).processor()
    processor.hold_out(1)  # every report with a known answer is held out
    processor.ingest(cited("i1"))
    processor.ingest(scored("r1", 0.9))
    assert processor.ready() == 0
    [task] = processor.gate_tasks()
    assert (task["id"], task["checker"], task["answer"]) == ("r1", "f1", "4")


async def test_its_step_trains_the_sft_loss_with_the_deployments_training_settings(tmp_path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    settings = configured(model=model)
    recipe = load_recipe(DOTTED, settings)
    backend = PolicyBackend()
    ctx = GrowContext("s", 1, tmp_path, settings, DictEngine(), None, None, lambda event: None, lambda: backend)  # type: ignore[arg-type]

    candidate = await recipe.grow(Batch("b1", [{"messages": [], "completion_text": "4"}], ["r1"]), None, ctx)

    [job] = backend.jobs
    assert job.loss == "sft" and job.samples == [{"messages": [], "completion_text": "4"}]
    assert job.training.lora_rank == 4 and job.training.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert job.recipe_config.min_score == 0.5 and candidate.path == job.output_dir
    assert Capability.SERVE_ADAPTER in recipe_class(DOTTED).surface.needs  # the engine's adapter check applies


@pytest.mark.parametrize(
    ("recipe", "named"),
    [
        ("tests.fakes.bad_recipes:NoLoss", "declares no loss_name"),
        ("tests.fakes.bad_recipes:UnknownLoss", "unknown loss 'filtered_sft_noloss'"),
        (
            "tests.fakes.bad_recipes:MissingLossFunction",
            "no function 'no_such_loss' in module 'tests.fakes.bad_recipes'",
        ),
        ("tests.fakes.bad_recipes:LossWithoutItsSettings", "the loss 'rl' reads ['clip_high', 'clip_low']"),
        ("tests.fakes.bad_recipes:CollidingKeys", "['learning_rate'] are training settings"),
        ("tests.fakes.bad_recipes:MalformedReport", "report_model must subclass"),
        ("tests.fakes.bad_recipes:Nameless", "declares no name"),
        ("tests.examples.filtered_sft:FilteredSTF", "no class 'FilteredSTF' in module 'tests.examples.filtered_sft'"),
    ],
)
def test_what_a_recipe_author_can_get_wrong_stops_reef_serve_naming_it(recipe: str, named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        startup.check_startup(configured(recipe))
    assert named in str(refused.value) and "learning.recipe" in str(refused.value)
