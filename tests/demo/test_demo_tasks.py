"""The demo's task suite and grading: disjoint splits, one right answer each, graded the way the gate grades."""

from __future__ import annotations

import re

import pytest

from reef.demo.tasks import (
    FAMILIES,
    SPLITS,
    DemoTask,
    contains_answer,
    exact_pattern,
    generate,
    is_exact,
    normalize,
    partial_credit,
)
from reef.learning.evaluation.checkers import check
from reef.learning.evaluation.tasks import parse_task


def test_generation_is_deterministic_for_a_seed() -> None:
    assert generate("test", 30, seed=3) == generate("test", 30, seed=3)
    assert generate("test", 30, seed=3) != generate("test", 30, seed=4)


@pytest.mark.parametrize("split", SPLITS)
def test_a_split_holds_distinct_prompts_from_every_family(split: str) -> None:
    tasks = generate(split, 21)
    assert len({t.prompt for t in tasks}) == len(tasks) == 21
    assert {t.family for t in tasks} == set(FAMILIES)


def test_no_prompt_appears_in_two_splits() -> None:
    prompts = {split: {t.prompt for t in generate(split, 200)} for split in SPLITS}
    assert not prompts["train"] & prompts["validation"]
    assert not prompts["train"] & prompts["test"]
    assert not prompts["validation"] & prompts["test"]


def test_no_answer_of_the_test_split_is_taught_in_training() -> None:
    train_answers = {t.answer for t in generate("train", 300) if t.family not in ("add", "first_letter")}
    test_answers = {t.answer for t in generate("test", 60) if t.family not in ("add", "first_letter")}
    assert not train_answers & test_answers


def test_every_answer_is_short_and_appears_in_its_prompt_or_is_computed() -> None:
    for task in generate("train", 100):
        assert 0 < len(task.answer) <= 12
        if task.family in ("number", "name", "city", "color", "repeat"):
            assert task.answer in task.prompt


def test_sums_are_right() -> None:
    for task in generate("test", 70, families=["add"]):
        a, b = map(int, re.findall(r"\d+", task.prompt))
        assert task.answer == str(a + b)


def test_grading_forgives_whitespace_a_trailing_period_and_quotes() -> None:
    task = DemoTask("city", "Which city is mentioned: 'We flew to Paris in May.'", "Paris")
    for text in ("Paris", " Paris\n", "Paris.", '"Paris"', "'Paris'."):
        assert is_exact(task, text), text
    for text in ("paris", "Paris, France.", "The city mentioned is Paris.", ""):
        assert not is_exact(task, text), text
    assert normalize("  42. ") == "42"


def test_the_gate_pattern_accepts_exactly_what_the_demo_accepts() -> None:
    task = DemoTask("add", "Reply with only the answer. 3 + 4 =", "7")
    row = task.to_evaluation_row()
    gate_task = parse_task(row, "row")
    for text in ("7", " 7.\n", '"7"', "17", "7 apples", "The answer is 7.", "7.5"):
        assert check(gate_task, text) == float(is_exact(task, text)), text
    assert re.search(exact_pattern("a.b"), "axb") is None


def test_contains_looks_for_the_whole_answer_not_a_piece_of_another_number() -> None:
    task = DemoTask("add", "Reply with only the answer. 2 + 2 =", "4")
    assert contains_answer(task, "The answer is 4.")
    assert not contains_answer(task, "The answer is 14.")


def test_partial_credit_ranks_exact_then_short_then_verbose_then_wrong() -> None:
    task = DemoTask("number", "Extract the number: 'The trip is 26 km.'", "26")
    exact = partial_credit(task, "26")
    short = partial_credit(task, "26 km")
    verbose = partial_credit(task, "The number mentioned in the sentence is 26, which is the distance.")
    wrong = partial_credit(task, "The number is 62.")
    assert exact == 1.0
    assert 1.0 > short > verbose >= 0.2 > wrong == 0.0


def test_the_partial_credit_gate_row_grades_like_the_rl_reward() -> None:
    task = DemoTask("number", "Extract the number: 'The trip is 26 km.'", "26")
    gate_task = parse_task(task.to_evaluation_row("partial"), "row")
    for text in ("26", "The number is 26.", "62", "26 km"):
        assert check(gate_task, text) == partial_credit(task, text), text
