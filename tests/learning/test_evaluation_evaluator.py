"""The paired evaluator: same tasks and sampling for both sides, through the engine."""

from __future__ import annotations

import json

from reef.core.settings import EvaluationSettings, Settings
from reef.learning.evaluation import TaskEvaluator, answer_text
from tests.fakes.dict_engine import ANSWERS_FILE, DictEngine
from tests.fakes.learning_world import write_tasks

TASKS = {"2+2?": "4", "3+3?": "6", "capital of France?": "Paris"}


def make(tmp_path, **evaluation):
    settings = Settings(evaluation=EvaluationSettings(tasks=write_tasks(tmp_path / "t.jsonl", TASKS), **evaluation))
    engine = DictEngine(base_answers={"2+2?": "4"})
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / ANSWERS_FILE).write_text(json.dumps({"2+2?": "4", "3+3?": "6"}))
    return TaskEvaluator(engine, settings), engine, candidate


async def test_scores_are_paired_per_task_in_file_order(tmp_path):
    evaluator, _, candidate = make(tmp_path)
    candidate_scores, current_scores = await evaluator.paired_scores("s", candidate, "rel-1")
    assert candidate_scores == [1.0, 1.0, 0.0]
    assert current_scores == [1.0, 0.0, 0.0]


async def test_both_sides_get_the_same_body_and_only_the_candidate_gets_its_path(tmp_path):
    evaluator, engine, candidate = make(tmp_path, temperature=0.7, max_new_tokens=12)
    await evaluator.paired_scores("s", candidate, "rel-1")
    assert len(engine.calls) == 2 * len(TASKS)
    bodies = [body for body, _ in engine.calls]
    assert all(b["temperature"] == 0.7 and b["max_tokens"] == 12 and b["stream"] is False for b in bodies)
    by_side = {}
    for body, ctx in engine.calls:
        by_side.setdefault(ctx.candidate_path is not None, []).append(body["messages"])
    assert sorted(map(json.dumps, by_side[True])) == sorted(map(json.dumps, by_side[False]))
    assert {ctx.release_id for _, ctx in engine.calls} == {"rel-1"}
    assert {ctx.candidate_path for _, ctx in engine.calls} == {None, candidate}


async def test_no_tasks_means_no_scores(tmp_path):
    evaluator = TaskEvaluator(DictEngine(), Settings())
    assert evaluator.tasks("s") == []
    assert await evaluator.paired_scores("s", tmp_path, None) == ([], [])


def test_answer_text_reads_string_and_part_list_content():
    assert answer_text({"choices": [{"message": {"content": "hi"}}]}) == "hi"
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}
    assert answer_text(parts) == "ab"
    assert answer_text({"choices": [{"message": {"content": None}}]}) == ""
