"""Checkers and the held-out task file."""

from __future__ import annotations

import json

import pytest

from reef.core.errors import BadRequest
from reef.learning.evaluation import check, load_tasks, parse_task


def task(**row):
    return parse_task(row, "t")


def test_exact_ignores_surrounding_whitespace_only():
    assert check(task(prompt="p", answer="22"), " 22\n") == 1.0
    assert check(task(prompt="p", answer="22"), "22.") == 0.0


def test_contains_finds_the_answer_anywhere():
    assert check(task(prompt="p", checker="contains", answer="22"), "20 + 2 = 22, of course") == 1.0
    assert check(task(prompt="p", checker="contains", answer="23"), "22") == 0.0


def test_regex_searches_the_pattern():
    assert check(task(prompt="p", checker="regex", pattern=r"^[A-Z]+$"), "HELLO") == 1.0
    assert check(task(prompt="p", checker="regex", pattern=r"^[A-Z]+$"), "Hello") == 0.0


def test_numeric_takes_the_last_number_of_the_answer():
    numeric = task(prompt="p", checker="numeric", answer=22)
    assert check(numeric, "20 + 2 = 22") == 1.0
    assert check(numeric, "It is 22.0") == 1.0
    assert check(numeric, "22 or maybe 23") == 0.0
    assert check(numeric, "twenty-two") == 0.0
    assert check(task(prompt="p", checker="numeric", answer=1234.5), "total: 1,234.5") == 1.0


def test_a_dotted_checker_is_imported_and_called():
    custom = task(prompt="p", checker="tests.fakes.evaluation:shout_checker")
    assert check(custom, "YES") == 0.5
    with pytest.raises(BadRequest):
        check(task(prompt="p", checker="tests.learning.nowhere:nothing"), "x")


def test_a_task_without_what_its_checker_needs_is_refused():
    with pytest.raises(BadRequest, match="answer"):
        task(prompt="p", checker="exact")
    with pytest.raises(BadRequest, match="pattern"):
        task(prompt="p", checker="regex")
    with pytest.raises(BadRequest, match="prompt"):
        task(answer="x")
    with pytest.raises(BadRequest, match="checker"):
        task(prompt="p", checker="fuzzy", answer="x")


def test_tasks_load_per_scenario_from_a_file_or_a_directory(tmp_path):
    rows = [
        {"prompt": "shared", "answer": "1"},
        {"prompt": "mine", "answer": "2", "scenario": "a"},
        {"messages": [{"role": "user", "content": "theirs"}], "answer": "3", "scenario": "b"},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert [t.messages[-1]["content"] for t in load_tasks(path, "a")] == ["shared", "mine"]
    assert [t.messages[-1]["content"] for t in load_tasks(path, "b")] == ["shared", "theirs"]

    directory = tmp_path / "per-scenario"
    directory.mkdir()
    (directory / "a.jsonl").write_text(json.dumps({"prompt": "only a", "answer": "x"}) + "\n")
    assert len(load_tasks(directory, "a")) == 1
    assert load_tasks(directory, "b") == []
    assert load_tasks(None, "a") == []


def test_a_broken_task_line_is_reported_with_its_line_number(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"prompt": "ok", "answer": "1"}\n{not json\n')
    with pytest.raises(BadRequest, match="tasks.jsonl:2"):
        load_tasks(path, "a")
