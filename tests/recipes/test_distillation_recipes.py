"""The distillation recipes (`sdft`, `opd`, `sdpo`): report validation, the teacher's prompt, and their processors."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.core.settings import LearningSettings, Settings
from reef.learning.base import Batch, TrainingJob
from reef.learning.recipes_registry import load_recipe
from reef.learning.report import parse_report
from reef.recipes.distillation import with_context
from reef.recipes.opd import multi_turn_sample
from reef.releases.git import open_release_store
from reef.training.jobfile import JobTeacher
from reef.training.teacher_spec import parse_teacher

_sequence = itertools.count(1)
QUESTION = [{"role": "user", "content": "2+2?"}]


def settings(recipe: str, batch_size: int = 1, **recipe_config) -> Settings:
    return Settings(learning=LearningSettings(recipe=recipe, batch_size=batch_size, recipe_config=recipe_config))


def inference(record_id: str, answer: str = "4", release_id: str = "r1", prompt: list[int] | None = None) -> Record:
    payload = {
        "request": {"messages": QUESTION},
        "response": {"choices": [{"message": {"role": "assistant", "content": answer}}]},
        "release_id": release_id,
        "training": {"prompt_token_ids": prompt or [1, 2, 3], "completion_token_ids": [4, 5], "logprobs": [-0.1, -0.2]},
    }
    record = Record.new("s", "inference", payload, created_at=0.0, agent_record_id=record_id)
    return dataclasses.replace(record, sequence=next(_sequence))


def report(record_id: str, references: list[str], **fields) -> Record:
    record = Record.new("s", "report", {"references": references, **fields}, created_at=0.0, agent_record_id=record_id)
    return dataclasses.replace(record, sequence=next(_sequence))


def test_the_context_block_goes_on_the_last_user_message_or_after_a_tool_result_as_a_new_one():
    assert with_context(QUESTION, " hint")[-1]["content"] == "2+2? hint"
    parts = with_context([{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}], " hint")
    assert parts[-1]["content"][-1] == {"type": "text", "text": " hint"}
    after_tool = with_context([*QUESTION, {"role": "tool", "tool_call_id": "c", "content": "4"}], "\n\nhint")
    assert after_tool[-1] == {"role": "user", "content": "hint"} and len(after_tool) == 3
    as_turn = with_context(QUESTION, "4", placement="turn")
    assert as_turn == [*QUESTION, {"role": "assistant", "content": "4"}, *QUESTION]
    assert QUESTION == [{"role": "user", "content": "2+2?"}]  # the student's messages are not touched
    shown_twice = with_context(QUESTION, "4", placement="turn", turns=2)
    assert shown_twice == QUESTION + [{"role": "assistant", "content": "4"}, *QUESTION] * 2


def test_the_sdft_teacher_is_shown_the_demonstration_as_context_turns_earlier_exchanges():
    config = {"context_as": "turn", "context_template": "{context}", "context_turns": 3}
    processor = load_recipe("sdft", settings("sdft", **config)).processor()
    processor.ingest(inference("i1", answer="The answer is 4."))
    processor.ingest(report("f1", ["i1"], metadata={"demonstration": "4"}))
    (sample,) = processor.build_batch().samples
    assert sample["teacher_messages"] == QUESTION + [{"role": "assistant", "content": "4"}, *QUESTION] * 3


@pytest.mark.parametrize("turns", [0, 9, 1.5, "2", True])
def test_a_bad_context_turns_is_refused_naming_the_field(turns):
    with pytest.raises(BadRequest) as error:
        load_recipe("sdft", settings("sdft", context_as="turn", context_turns=turns))
    assert error.value.field == "recipe_config.context_turns"


def test_an_sdft_report_without_a_context_or_receipt_is_accepted_and_skipped_but_a_malformed_context_is_refused():
    recipe = load_recipe("sdft", settings("sdft"))
    for field, value in (("teacher_context", " "), ("teacher_context", 3), ("demonstration", {"text": "4"})):
        with pytest.raises(BadRequest) as error:
            parse_report(recipe, {"references": ["r1"], "metadata": {field: value}})
        assert error.value.field == f"metadata.{field}"
    for body in ({"score": 1.0}, {"metadata": {"demonstration": "4"}}, {"references": ["r1"], "feedback": "good"}):
        parse_report(recipe, body)
    parse_report(recipe, {"references": ["r1"], "metadata": {"demonstration": {"content": "4"}}})
    assert "required" not in recipe.report_model.json_schema(recipe)
    processor = recipe.processor()
    processor.ingest(inference("i1"))
    processor.ingest(report("f1", ["i1"], score=1.0))
    processor.ingest(report("f2", [], metadata={"demonstration": "4"}))
    assert processor.ready() == 0 and processor.skipped_counts() == {"no_context": 1, "no_references": 1}


def test_the_sdft_processor_keeps_the_rollout_and_gives_the_teacher_the_demonstration():
    processor = load_recipe("sdft", settings("sdft")).processor()
    processor.ingest(inference("i1", answer="The answer is 4."))
    processor.ingest(report("f1", ["i1"], metadata={"demonstration": "4"}))
    batch = processor.build_batch()
    (sample,) = batch.samples
    assert sample["prompt_ids"] == [1, 2, 3] and sample["completion_ids"] == [4, 5]
    assert sample["old_logprobs"] == [-0.1, -0.2]
    assert sample["teacher_messages"] == [{"role": "user", "content": "2+2?\n\nThe correct reply is:\n4"}]
    assert batch.record_ids == ["f1", "i1"]


def test_the_teacher_setting_is_parsed_and_a_bad_one_refused_naming_recipe_config_teacher(tmp_path):
    assert parse_teacher("ema").kind == "ema" and parse_teacher("release:abc").name == "abc"
    assert parse_teacher("scenario:teacher").kind == "scenario"
    for bad in ("", "release:", str(tmp_path / "missing"), 3):
        with pytest.raises(BadRequest) as error:
            parse_teacher(bad)
        assert error.value.field == "recipe_config.teacher"
    for config in ({"teacher": "nowhere/at/all"}, {}):  # opd has no default teacher: it must be named
        with pytest.raises(BadRequest) as error:
            load_recipe("opd", settings("opd", **config))
        assert error.value.field == "recipe_config.teacher"


def test_an_unknown_teacher_release_is_refused_naming_recipe_config_teacher(tmp_path):
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "work")
    recipe = load_recipe("opd", settings("opd", teacher="release:no-such-release"))
    with pytest.raises(BadRequest) as error:
        recipe.extensions().check_teacher(releases, ["s"])
    assert error.value.field == "recipe_config.teacher"
    with pytest.raises(BadRequest):
        load_recipe("opd", settings("opd", teacher="scenario:nobody")).extensions().check_teacher(releases, ["s"])
    (tmp_path / "content").mkdir()
    (tmp_path / "content" / "note.txt").write_text("base")
    release = releases.publish("s", tmp_path / "content", None, operation="creation", recipe="sft")
    load_recipe("opd", settings("opd", teacher=f"release:{release.release_id}")).extensions().check_teacher(
        releases, ["s"]
    )
    load_recipe("opd", settings("opd", teacher="scenario:s")).extensions().check_teacher(releases, ["s"])


def test_a_distillation_job_names_its_teacher_by_kind_or_as_the_model_directory_of_the_release(tmp_path):
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "work")
    (tmp_path / "content").mkdir()
    (tmp_path / "content" / "note.txt").write_text("base")
    release = releases.publish("s", tmp_path / "content", None, operation="creation", recipe="sft")
    ctx = SimpleNamespace(scenario="s", releases=releases, records=SimpleNamespace(scenarios=list))

    def prepared(recipe: str, **config) -> TrainingJob:
        chosen = load_recipe(recipe, settings(recipe, **config))
        job = chosen.training_job(Batch("b", [], []), tmp_path / "base", None, tmp_path / "out")
        assert job.teacher is None and job.recipe_config is chosen.recipe_config
        return chosen.with_teacher(job, ctx)  # type: ignore[arg-type]

    assert prepared("sdpo").teacher == JobTeacher("ema")
    assert prepared("sdft").teacher == JobTeacher("self")
    assert prepared("opd", teacher=f"release:{release.release_id}").teacher == JobTeacher(
        "model", releases.materialize(release)
    )


def test_the_turns_of_one_conversation_become_one_sample_that_trains_only_the_models_tokens():
    first = {"prompt_ids": [1, 2], "completion_ids": [3, 4], "old_logprobs": [-0.3, -0.4]}
    second = {"prompt_ids": [1, 2, 3, 4, 7, 8], "completion_ids": [9], "old_logprobs": [-0.9]}
    joined = multi_turn_sample([first, second])
    assert joined["prompt_ids"] == [1, 2] and joined["completion_ids"] == [3, 4, 7, 8, 9]
    assert joined["completion_mask"] == [1, 1, 0, 0, 1]
    assert joined["old_logprobs"][:2] == [-0.3, -0.4] and math.isnan(joined["old_logprobs"][2])
    assert multi_turn_sample([first, {**second, "prompt_ids": [1, 2, 5, 4, 7]}]) is None


def test_the_opd_processor_trains_the_first_receipt_or_with_multi_turn_the_whole_conversation():
    single = load_recipe("opd", settings("opd", teacher="self")).processor()
    multi = load_recipe("opd", settings("opd", teacher="self", accept_multi_turn=True)).processor()
    for processor in (single, multi):
        processor.ingest(inference("t1", prompt=[1, 2, 3]))
        processor.ingest(inference("t2", prompt=[1, 2, 3, 4, 5, 6]))
        processor.ingest(report("f1", ["t1", "t2"], score=0.0))
    (one,) = single.build_batch().samples
    assert one["completion_ids"] == [4, 5] and "teacher_messages" not in one
    (conversation,) = multi.build_batch().samples
    assert conversation["completion_ids"] == [4, 5, 6, 4, 5] and conversation["completion_mask"] == [1, 1, 0, 1, 1]
    plain = load_recipe("opd", settings("opd", teacher="self"))
    parse_report(plain, {"score": 1.0})  # cites nothing: stored, and skipped
    processor = plain.processor()
    processor.ingest(report("f2", [], score=1.0))
    assert processor.skipped_counts() == {"no_references": 1}


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"step": 1, "rollout": 0}, "metadata.group"),
        ({"step": 1, "group": "g", "rollout": "1"}, "metadata.rollout"),
        ({"step": 1, "group": "g", "rollout": True}, "metadata.rollout"),
        ({"group": "g", "rollout": 0}, "metadata.step"),
        ({"step": "", "group": "g", "rollout": 0}, "metadata.step"),
    ],
)
def test_an_sdpo_report_claiming_a_grid_cell_without_its_whole_position_is_refused_naming_the_field(metadata, field):
    recipe = load_recipe("sdpo", settings("sdpo"))
    with pytest.raises(BadRequest) as error:
        parse_report(recipe, {"score": 1.0, "references": ["r"], "metadata": metadata})
    assert error.value.field == field


def test_an_sdpo_grid_cell_needs_its_score_and_receipt_and_a_report_claiming_no_cell_is_accepted_and_skipped():
    recipe = load_recipe("sdpo", settings("sdpo"))
    cell = {"step": 1, "group": "g", "rollout": 0}
    for body, field in (
        ({"references": ["r"], "metadata": cell}, "score"),
        ({"score": 1.0, "metadata": cell}, "references"),
    ):
        with pytest.raises(BadRequest) as error:
            parse_report(recipe, body)
        assert error.value.field == field
    for body in ({"score": 1.0, "references": ["r"]}, {"feedback": "nice"}, {"metadata": {"demonstration": "4"}}):
        parse_report(recipe, body)
    processor = recipe.processor()
    processor.ingest(inference("i1"))
    processor.ingest(report("f1", ["i1"], score=1.0))
    assert processor.ready() == 0 and processor.waiting_grids() == 0
    assert processor.skipped_counts() == {"not_a_grid_cell": 1}


def grid_reports(processor, step: str, scores: dict[tuple[str, int], float], releases: dict[str, str] | None = None):
    for (group, rollout), score in scores.items():
        record_id = f"{step}-{group}-{rollout}"
        release = (releases or {}).get(record_id, "r1")
        processor.ingest(inference(f"i-{record_id}", answer=f"answer {record_id}", release_id=release))
        metadata = {"step": step, "group": group, "rollout": rollout}
        processor.ingest(report(f"f-{record_id}", [f"i-{record_id}"], score=score, metadata=metadata))


def test_sdpo_waits_for_the_full_grid_and_teaches_each_attempt_with_the_first_other_success():
    processor = load_recipe("sdpo", settings("sdpo", groups=2, rollouts=2)).processor()
    scores = {("a", 0): 1.0, ("a", 1): 0.0, ("b", 0): 0.2, ("b", 1): 0.3}
    grid_reports(processor, "s1", dict(list(scores.items())[:3]))
    assert processor.ready() == 0 and processor.waiting_grids() == 1
    grid_reports(processor, "s1", dict(list(scores.items())[3:]))
    batch = processor.build_batch()
    # a/0 succeeded but has no *other* success to learn from; a/1 learns from a/0; group b has no success at all.
    # Weight-0 attempts are left out of the step, but the whole grid is consumed with it.
    (sample,) = batch.samples
    assert sample["weight"] == 1.0
    assert sample["teacher_messages"][-1]["content"] == "2+2?\n\nA correct reply is:\nanswer s1-a-0"
    assert len(batch.record_ids) == 8


def test_with_self_demonstration_a_lone_success_is_shown_its_own_answer_and_a_sibling_still_comes_first():
    processor = load_recipe("sdpo", settings("sdpo", groups=2, rollouts=2, self_demonstration=True)).processor()
    scores = {("a", 0): 1.0, ("a", 1): 0.0, ("b", 0): 0.9, ("b", 1): 0.6}
    grid_reports(processor, "s1", scores)
    contexts = [sample["teacher_messages"][-1]["content"] for sample in processor.build_batch().samples]
    shown = [context.rsplit("\n", 1)[-1] for context in contexts]
    # a/0 is a lone success: its own answer; a/1 learns from a/0; b/0 and b/1 each learn from the other.
    assert shown == ["answer s1-a-0", "answer s1-a-0", "answer s1-b-1", "answer s1-b-0"]
    with pytest.raises(BadRequest) as error:
        load_recipe("sdpo", settings("sdpo", self_demonstration="yes"))
    assert error.value.field == "recipe_config.self_demonstration"


def test_sdpo_discards_a_grid_where_no_attempt_has_a_successful_sibling():
    processor = load_recipe("sdpo", settings("sdpo", groups=1, rollouts=2)).processor()
    grid_reports(processor, "s3", {("a", 0): 1.0, ("a", 1): 0.2})
    grid_reports(processor, "s4", {("a", 0): 0.1, ("a", 1): 0.2})
    assert processor.ready() == 1  # s3: a/1 learns from a/0
    ((reason, record_ids),) = processor.discarded()
    assert "'s4'" in reason and "nothing to learn" in reason and len(record_ids) == 4


def test_sdpo_discards_a_grid_that_spans_two_releases_and_says_why():
    processor = load_recipe("sdpo", settings("sdpo", groups=1, rollouts=2)).processor()
    grid_reports(processor, "s2", {("a", 0): 1.0, ("a", 1): 0.0}, releases={"s2-a-1": "r2"})
    assert processor.ready() == 0
    ((reason, record_ids),) = processor.discarded()
    assert "spans releases r1, r2" in reason and sorted(record_ids) == sorted(
        ["f-s2-a-0", "i-s2-a-0", "f-s2-a-1", "i-s2-a-1"]
    )
    assert processor.discarded() == []


async def test_a_step_trains_with_the_teacher_release_resolved_to_its_directory(tmp_path):
    from reef.core.settings import InferenceSettings
    from reef.learning.base import Batch, GrowContext
    from reef.storage import open_record_store
    from tests.fakes.dict_engine import DictEngine
    from tests.fakes.policy_backend import PolicyBackend

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "work")
    (tmp_path / "teacher").mkdir()
    (tmp_path / "teacher" / "adapter_config.json").write_text("{}")
    teacher = releases.publish("s", tmp_path / "teacher", None, operation="creation", recipe="sft")
    config = settings("opd", teacher=f"release:{teacher.release_id}")
    config = config.model_copy(update={"inference": InferenceSettings(backend="local", model_path=str(model))})
    records = open_record_store("sqlite", directory=tmp_path / "records")
    backend = PolicyBackend()
    ctx = GrowContext(
        "s", 1, tmp_path / "step", config, DictEngine(), records, None, lambda event: None, lambda: backend, releases
    )

    await load_recipe("opd", config).grow(Batch("b1", [{"prompt_ids": [1]}], ["r1"]), None, ctx)

    [job] = backend.jobs
    assert job.loss == "opd" and job.teacher is not None and job.teacher.kind == "model"
    assert job.teacher.path is not None and (Path(job.teacher.path) / "adapter_config.json").exists()
