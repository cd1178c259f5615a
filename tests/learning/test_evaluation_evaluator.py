"""The paired evaluator: same tasks and sampling for both sides, through the engine."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from reef.core.errors import BadRequest
from reef.core.settings import EvaluationSettings, Settings
from reef.inference.base import RequestContext
from reef.learning.evaluation import TaskEvaluator, answer_text
from tests.fakes.dict_engine import ANSWERS_FILE, DictEngine, read_answers
from tests.fakes.learning_world import write_tasks

TASKS = {"2+2?": "4", "3+3?": "6", "capital of France?": "Paris"}


class ScoringEngine(DictEngine):
    """Teacher-forced scores from the same tables: each token of the side's own answer has probability 0.8 and the
    end of turn 0.5; any other answer's tokens 0.1 each."""

    scores_completions = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scored: list[tuple[str, str, RequestContext]] = []

    async def score_answer(self, body: dict[str, Any], answer: str, ctx: RequestContext) -> list[float]:
        prompt = body["messages"][-1]["content"]
        self.scored.append((prompt, answer, ctx))
        table = read_answers(ctx.candidate_path) if ctx.candidate_path else {}
        own = table.get(prompt, self.base_answers.get(prompt))
        if own == answer:
            return [math.log(0.8)] * len(answer) + [math.log(0.5)]
        return [math.log(0.1)] * (len(answer) + 1)


def make(tmp_path, engine_class=DictEngine, **evaluation):
    settings = Settings(evaluation=EvaluationSettings(tasks=write_tasks(tmp_path / "t.jsonl", TASKS), **evaluation))
    engine = engine_class(base_answers={"2+2?": "4"})
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


async def test_likelihood_scores_the_known_answer_on_both_sides_without_generating(tmp_path):
    evaluator, engine, candidate = make(tmp_path, ScoringEngine, scoring="likelihood")
    candidate_scores, current_scores = await evaluator.paired_scores("s", candidate, "rel-1")
    known, other = math.exp((math.log(0.8) + math.log(0.5)) / 2), 0.1  # one-character answers known; Paris not
    assert candidate_scores == pytest.approx([known, known, other])
    assert current_scores == pytest.approx([known, other, other])
    assert engine.calls == []  # nothing generated
    assert sorted((prompt, answer) for prompt, answer, _ in engine.scored) == sorted(
        (prompt, answer) for prompt, answer in TASKS.items() for _ in range(2)
    )
    assert {ctx.candidate_path for _, _, ctx in engine.scored} == {None, candidate}


def test_likelihood_needs_an_engine_that_scores(tmp_path):
    with pytest.raises(BadRequest, match="cannot: use 'checker'") as refused:
        make(tmp_path, DictEngine, scoring="likelihood")
    assert refused.value.field == "evaluation.scoring"


async def test_likelihood_fails_naming_a_task_with_no_answer(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "shape", "prompt": "2+2?", "checker": "regex", "pattern": "^4$"}) + "\n")
    settings = Settings(evaluation=EvaluationSettings(tasks=path, scoring="likelihood"))
    with pytest.raises(ValueError, match="task shape has no answer"):
        await TaskEvaluator(ScoringEngine(), settings).paired_scores("s", tmp_path, None)


async def test_no_tasks_means_no_scores(tmp_path):
    evaluator = TaskEvaluator(DictEngine(), Settings())
    assert evaluator.tasks("s") == []
    assert await evaluator.paired_scores("s", tmp_path, None) == ([], [])


def test_answer_text_reads_string_and_part_list_content():
    assert answer_text({"choices": [{"message": {"content": "hi"}}]}) == "hi"
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}
    assert answer_text(parts) == "ab"
    assert answer_text({"choices": [{"message": {"content": None}}]}) == ""
