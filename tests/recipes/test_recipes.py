"""The built-in recipes: loading by name, report validation, and processors joining reports with records."""

from __future__ import annotations

import dataclasses
import itertools

import jsonschema
import pytest

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.core.settings import LearningSettings, Settings
from reef.learning.recipes_registry import builtin_recipes, load_recipe
from reef.learning.report import parse_report

_sequence = itertools.count(1)


def settings(recipe: str, batch_size: int = 2, **recipe_config) -> Settings:
    return Settings(learning=LearningSettings(recipe=recipe, batch_size=batch_size, recipe_config=recipe_config))


def inference(record_id: str, training: bool = True, tags: dict | None = None) -> Record:
    payload = {
        "request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "4"}}]},
        "tags": tags or {},
    }
    if training:
        payload["training"] = {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5], "logprobs": [-0.1, -0.2]}
    record = Record.new("s", "inference", payload, created_at=0.0, agent_record_id=record_id)
    return dataclasses.replace(record, sequence=next(_sequence))


def report(record_id: str, references: list[str], **fields) -> Record:
    record = Record.new("s", "report", {"references": references, **fields}, created_at=0.0, agent_record_id=record_id)
    return dataclasses.replace(record, sequence=next(_sequence))


def test_recipes_load_by_builtin_name_or_dotted_class():
    assert load_recipe("sft", settings("sft")).loss_name == "sft"
    assert load_recipe("reef.recipes.grpo:GRPORecipe", settings("grpo")).name == "grpo"
    basic = load_recipe("basic", settings("basic"))
    assert basic.surface.name == "none" and basic.processor() is None
    for name in ("rl", "sft", "grpo"):
        assert load_recipe(name, settings(name)).surface.name == "weights"


def test_an_unknown_recipe_is_refused_naming_the_setting():
    with pytest.raises(BadRequest) as error:
        load_recipe("no_such_recipe", settings("basic"))
    assert error.value.field == "learning.recipe"
    with pytest.raises(BadRequest):
        load_recipe("reef.core.records:Record", settings("basic"))


def test_an_sft_report_without_a_demonstration_is_accepted_and_only_a_malformed_one_is_refused():
    recipe = load_recipe("sft", settings("sft"))
    for body in ({"references": ["r1"], "feedback": "good"}, {"score": 1.0}, {"metadata": {"demonstration": "4"}}):
        parse_report(recipe, body)
    for demonstration in (4, "", ["4"], {"content": ""}, {"text": "4"}):
        with pytest.raises(BadRequest) as error:
            parse_report(recipe, {"score": 1.0, "metadata": {"demonstration": demonstration}})
        assert error.value.field == "metadata.demonstration"
    from_feedback = load_recipe("sft", settings("sft", demonstration_from_feedback=True))
    for body in ({"feedback": "4"}, {"metadata": {"demonstration": "4"}}, {"score": 0.0}, {"feedback": {"up": 1}}):
        parse_report(from_feedback, body)
    with pytest.raises(BadRequest) as error:
        parse_report(from_feedback, {"feedback": ""})
    assert error.value.field == "feedback"
    assert (
        "required" not in recipe.report_model.json_schema(recipe)
        and "metadata.demonstration" in recipe.report_model.json_schema(recipe)["description"]
    )


def test_the_sft_processor_skips_a_report_without_a_demonstration_and_consumes_it_with_the_next_batch():
    processor = load_recipe("sft", settings("sft", batch_size=1)).processor()
    processor.ingest(inference("i1"))
    processor.ingest(inference("i2"))
    processor.ingest(report("thumbs", ["i1"], score=1.0))
    assert processor.ready() == 0 and processor.skipped_counts() == {"no_demonstration": 1}
    processor.ingest(report("r2", ["i2"], metadata={"demonstration": "4"}))
    batch = processor.build_batch()
    assert batch is not None and len(batch.samples) == 1
    assert sorted(batch.record_ids) == ["i1", "i2", "r2", "thumbs"]


@pytest.mark.parametrize("recipe_name", ["rl", "grpo"])
def test_a_scored_recipe_accepts_a_report_without_a_score_and_skips_it(recipe_name):
    recipe = load_recipe(recipe_name, settings(recipe_name))
    for body in ({"feedback": "x"}, {"metadata": {"demonstration": "4"}}, {"score": 0.5}):
        parse_report(recipe, body)
    assert "required" not in recipe.report_model.json_schema(recipe)
    processor = recipe.processor()
    processor.ingest(inference("i1"))
    processor.ingest(report("r1", ["i1"], feedback="x"))
    processor.ingest(report("r2", [], score=1.0))
    assert processor.ready() == 0
    assert processor.skipped_counts() == {"no_references": 1, "no_score": 1}


def test_a_score_only_report_is_never_held_out_by_sft_and_the_gate_says_what_it_needs():
    processor = load_recipe("sft", settings("sft")).processor()
    processor.hold_out(1)
    processor.ingest(inference("i1"))
    processor.ingest(report("r1", ["i1"], score=1.0))
    assert processor.gate_tasks() == [] and processor.skipped_counts() == {"no_demonstration": 1}
    assert "metadata.demonstration" in (processor.held_out_rule() or "")
    ranked = load_recipe("rl", settings("rl")).processor()
    ranked.hold_out(4, rollouts=False)
    assert ranked.held_out_rule() is None  # an engine that cannot score tokens: nothing is held out
    assert load_recipe("grpo", settings("grpo")).processor().held_out_rule() is None  # groups cannot be split


def test_the_sft_processor_joins_demonstrations_with_the_cited_prompt_and_batches_them():
    processor = load_recipe("sft", settings("sft", batch_size=2)).processor()
    processor.ingest(inference("i1"))
    processor.ingest(inference("i2", training=False))
    processor.ingest(report("r1", ["i1"], metadata={"demonstration": "4"}))
    assert processor.ready() == 1 and processor.build_batch() is None
    processor.ingest(report("r2", ["i2"], metadata={"demonstration": {"content": "four"}}))
    batch = processor.build_batch()
    assert batch is not None and processor.ready() == 0
    assert batch.samples[0] == {"prompt_ids": [1, 2, 3], "completion_text": "4"}
    # Without token capture the prompt travels as chat messages, for the job to render as the engine does.
    messages = [{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}]
    assert batch.samples[1] == {"messages": messages, "completion_text": "four"}
    assert sorted(batch.record_ids) == ["i1", "i2", "r1", "r2"]
    processor.acknowledge(batch.batch_id)
    assert processor.build_batch() is None


def test_a_report_citing_a_record_not_seen_yet_waits_for_it():
    processor = load_recipe("sft", settings("sft", batch_size=1)).processor()
    processor.ingest(report("r1", ["i1"], metadata={"demonstration": "4"}))
    assert processor.ready() == 0 and processor.pending() == 1
    processor.ingest(inference("i1"))
    assert processor.ready() == 1 and processor.pending() == 0


def test_a_fresh_processor_fed_the_same_unconsumed_records_rebuilds_the_same_batch():
    records = [inference("i1"), report("r1", ["i1"], metadata={"demonstration": "4"})]
    first, second = (load_recipe("sft", settings("sft", batch_size=1)).processor() for _ in range(2))
    for record in records:
        first.ingest(record)
        second.ingest(record)
        second.ingest(record)  # a replay overlapping what was already ingested changes nothing
    a, b = first.build_batch(), second.build_batch()
    assert a.samples == b.samples and a.record_ids == b.record_ids
    assert second.ready() == 0


def test_the_rl_processor_uses_recorded_tokens_and_skips_rollouts_without_capture():
    processor = load_recipe("rl", settings("rl", batch_size=2, baseline_decay=0.5, min_std=1.0)).processor()
    processor.ingest(inference("i1"))
    processor.ingest(inference("i2", training=False))
    processor.ingest(inference("i3"))
    processor.ingest(report("r1", ["i1"], score=1.0))
    processor.ingest(report("r2", ["i2"], score=1.0))
    processor.ingest(report("r3", ["i3"], score=0.0))
    assert processor.skipped["no_training_capture"] == 1
    batch = processor.build_batch()
    assert [s["advantage"] for s in batch.samples] == [pytest.approx(1.0), pytest.approx(-0.5)]
    assert batch.samples[0]["old_logprobs"] == [-0.1, -0.2] and batch.samples[0]["completion_ids"] == [4, 5]
    # The skipped report and its record are consumed with the batch so they are not replayed forever.
    assert sorted(batch.record_ids) == ["i1", "i2", "i3", "r1", "r2", "r3"]


def test_rl_keeps_a_running_baseline_per_metadata_value_when_asked():
    config = {"baseline_decay": 0.5, "min_std": 1.0, "baseline_by": "task"}
    processor = load_recipe("rl", settings("rl", batch_size=4, **config)).processor()
    for number in range(1, 5):
        processor.ingest(inference(f"k{number}"))
    # An easy kind scores high, a hard one low: each is judged against its own kind.
    processor.ingest(report("q1", ["k1"], score=1.0, metadata={"task": "easy"}))
    processor.ingest(report("q2", ["k2"], score=1.0, metadata={"task": "easy"}))
    processor.ingest(report("q3", ["k3"], score=0.0, metadata={"task": "hard"}))
    processor.ingest(report("q4", ["k4"], score=0.5))  # no task: the scenario's own baseline
    advantages = [s["advantage"] for s in processor.build_batch().samples]
    assert advantages == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.0), pytest.approx(0.5)]


def test_grpo_waits_for_a_full_group_and_normalizes_advantages_within_it():
    processor = load_recipe("grpo", settings("grpo", batch_size=2, group_size=2)).processor()
    processor.ingest(inference("i1", tags={"group": "g"}))
    processor.ingest(inference("i2"))
    processor.ingest(report("r1", ["i1"], score=1.0))
    assert processor.ready() == 0
    processor.ingest(report("r2", ["i2"], score=0.0, metadata={"group": "g"}))
    assert processor.ready() == 1
    batch = processor.build_batch()
    assert [s["advantage"] for s in batch.samples] == pytest.approx([1.0, -1.0], rel=1e-4)
    assert sorted(batch.record_ids) == ["i1", "i2", "r1", "r2"]


def test_grpo_drops_a_group_whose_rewards_are_all_equal():
    processor = load_recipe("grpo", settings("grpo", batch_size=3, group_size=3)).processor()
    for n in range(3):
        processor.ingest(inference(f"i{n}", tags={"group": "same"}))
        processor.ingest(report(f"r{n}", [f"i{n}"], score=0.5))
    assert processor.ready() == 0 and processor.skipped["constant_group"] == 1


def test_only_the_newest_rollouts_are_held_and_an_older_cited_one_is_asked_for(monkeypatch):
    from reef.recipes import reports

    monkeypatch.setattr(reports, "MAX_HELD_ROLLOUTS", 2)
    processor = load_recipe("sft", settings("sft", batch_size=1)).processor()
    for record_id in ("i1", "i2", "i3"):
        processor.ingest(inference(record_id))
    assert processor.wanted() == []
    processor.ingest(report("r1", ["i1"], metadata={"demonstration": "4"}))  # i1 was let go
    assert processor.ready() == 0 and processor.wanted() == ["i1"]
    processor.ingest(inference("i1"))  # read back by id
    assert processor.ready() == 1 and processor.wanted() == []


WELL_FORMED_REPORTS = [
    {"score": 1.0, "references": ["i1"]},
    {"score": 0.0},
    {"feedback": "the answer was wrong"},
    {"feedback": {"thumb": "down"}, "references": ["i1"]},
    {"metadata": {"demonstration": "4"}, "references": ["i1"]},
    {"score": 0.5, "feedback": "close", "metadata": {"demonstration": "4", "user": "u1"}, "references": ["i1"]},
]

EXTRA_CONFIG = {"opd": {"teacher": "self"}, "openclawrl": {"judge_function": "tests.fakes.session_judge:rule_judge"}}


@pytest.mark.parametrize("recipe_name", sorted(builtin_recipes()))
def test_every_builtin_recipe_accepts_every_well_formed_report_and_its_processor_skips_what_it_cannot_use(
    recipe_name,
):
    recipe = load_recipe(recipe_name, settings(recipe_name, **EXTRA_CONFIG.get(recipe_name, {})))
    for body in WELL_FORMED_REPORTS:
        parse_report(recipe, body)
    schema = recipe.report_model.json_schema(recipe)
    for body in WELL_FORMED_REPORTS:
        jsonschema.validate(body, schema)  # the contract's schema takes what the server takes
    processor = recipe.processor()
    if processor is None:
        return
    processor.ingest(inference("i1"))
    for number, body in enumerate(WELL_FORMED_REPORTS):
        processor.ingest(report(f"r{number}", **{"references": [], **body}))  # never raises
    assert all(isinstance(n, int) and n > 0 for n in processor.skipped_counts().values())
