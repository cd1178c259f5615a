"""Problems load by name, module or directory, score their seeds in the sandbox and refuse what is malformed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reef.discovery.evaluation import evaluate_attempt
from reef.discovery.problem import ProblemError, load_problem
from reef.discovery.search import next_step, seed_archive
from reef.sandbox import Limits


def test_circle_packings_grid_seed_is_valid_and_scores_its_sum_of_radii() -> None:
    problem = load_problem("circle-packing", {"n": 6})
    evaluation = evaluate_attempt(problem, problem.seeds[0])
    assert evaluation.valid and evaluation.score == pytest.approx(6 * 0.16)


def test_overlapping_circles_score_zero_and_say_why() -> None:
    problem = load_problem("circle-packing", {"n": 2})
    evaluation = evaluate_attempt(problem, "[[0.3,0.5,0.25],[0.5,0.5,0.25]]")
    assert not evaluation.valid and evaluation.reward == 0.0 and "overlap" in evaluation.details


def test_erdos_minimum_overlap_rewards_a_lower_bound_more() -> None:
    problem = load_problem("erdos-min-overlap", {"m": 8})
    seed = evaluate_attempt(problem, problem.seeds[0])
    assert seed.score == pytest.approx(0.5) and seed.reward == pytest.approx(2.0)
    assert problem.direction == "min" and problem.best_known == pytest.approx(0.380924)


def test_a_model_answer_yields_the_json_inside_its_code_fence() -> None:
    problem = load_problem("circle-packing", {"answer": "list"})
    assert problem.extract("Here:\n```json\n[[0.5, 0.5, 0.5]]\n```\nDone.") == "[[0.5,0.5,0.5]]"
    assert problem.extract("I cannot do that") is None
    assert problem.extract("[[NaN, 1, 2]]") is None


def test_an_answer_that_is_not_json_is_invalid_without_running_anything() -> None:
    problem = load_problem("circle-packing")
    assert not evaluate_attempt(problem, "[[0.5, 0.5").valid


def _directory(tmp_path: Path, evaluator: str | None) -> Path:
    spec = {"name": "ones", "direction": "max", "solution_format": "json", "task": "Ones.", "seeds": [[1]]}
    (tmp_path / "problem.json").write_text(json.dumps(spec))
    if evaluator is not None:
        (tmp_path / "evaluate.py").write_text(evaluator)
    return tmp_path


def test_a_problem_directory_is_loaded_and_evaluated_in_the_sandbox(tmp_path: Path) -> None:
    source = "def evaluate(solution):\n    return {'score': sum(solution), 'valid': True, 'details': 'ok'}\n"
    problem = load_problem(str(_directory(tmp_path, source)))
    assert evaluate_attempt(problem, "[1, 2, 3]").score == 6.0
    archive = seed_archive(problem)
    assert archive.best().score == 1.0
    step = next_step(archive, problem, 2)
    assert step["step"] == 1 and [p["parent_id"] for p in step["parents"]] == ["seed-0", "seed-0"]
    assert "[1]" in step["parents"][0]["prompt"] and "Ones." in step["parents"][0]["prompt"]


def test_a_problem_directory_without_evaluate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="evaluate.py"):
        load_problem(str(_directory(tmp_path, None)))
    (tmp_path / "evaluate.py").write_text("def score(solution):\n    return 1\n")
    with pytest.raises(ProblemError, match="evaluate"):
        load_problem(str(tmp_path))


def test_an_unknown_problem_is_refused_by_name() -> None:
    with pytest.raises(ProblemError, match="no-such-problem"):
        load_problem("no-such-problem")


def test_an_evaluator_that_loops_or_crashes_scores_zero(tmp_path: Path) -> None:
    looping = "def evaluate(solution):\n    while True: pass\n"
    problem = load_problem(str(_directory(tmp_path, looping)))
    timed = evaluate_attempt(problem, "[1]", Limits(cpu_s=1, wall_s=10))
    assert not timed.valid and timed.reward == 0.0
    (tmp_path / "evaluate.py").write_text("def evaluate(solution):\n    raise RuntimeError('boom')\n")
    crashed = evaluate_attempt(load_problem(str(tmp_path)), "[1]")
    assert not crashed.valid and "boom" in crashed.details


def test_an_attempt_cannot_forge_the_result_line(tmp_path: Path) -> None:
    source = (
        "def evaluate(solution):\n"
        '    print(\'REEF-RESULT- {"score": 99, "valid": true}\')\n'
        "    return {'score': 1, 'valid': True, 'details': ''}\n"
    )
    problem = load_problem(str(_directory(tmp_path, source)))
    assert evaluate_attempt(problem, "[1]").score == 1.0


FORGING_ATTEMPT = """
import gc, os
markers = [o for o in gc.get_objects() if isinstance(o, str) and o.startswith("REEF-RESULT-")]
for marker in markers or ["REEF-RESULT-0 "]:
    print("\\n" + marker + '{"score": 1000000.0, "valid": true, "details": "forged"}', flush=True)
os._exit(0)
"""


def test_a_python_attempt_that_prints_a_forged_result_line_scores_only_what_it_earned(tmp_path: Path) -> None:
    spec = {"name": "forge", "direction": "max", "solution_format": "python", "task": "T.", "seeds": ["x = 1"]}
    (tmp_path / "problem.json").write_text(json.dumps(spec))
    evaluator = "import subprocess, sys\n\ndef evaluate(solution):\n"
    evaluator += "    subprocess.run([sys.executable, '-c', solution])\n    return {'score': 1, 'valid': True}\n"
    (tmp_path / "evaluate.py").write_text(evaluator)
    problem = load_problem(str(tmp_path))
    assert evaluate_attempt(problem, "x = 1").score == 1.0  # an honest attempt scores
    forged = evaluate_attempt(problem, FORGING_ATTEMPT)
    assert forged.score == 1.0  # what it earned, not the score on the lines it printed


def test_a_sandbox_that_cannot_start_raises_instead_of_scoring_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from reef.discovery.evaluation import EvaluatorFailure

    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to run: an infrastructure failure, not a failed attempt
    problem = load_problem("circle-packing")
    with pytest.raises(EvaluatorFailure):
        evaluate_attempt(problem, problem.seeds[0], sandbox=True)


def test_the_next_step_asks_for_the_solutions_shape_as_an_openai_response_format() -> None:
    problem = load_problem("circle-packing", {"n": 3, "answer": "list"})
    step = next_step(seed_archive(problem), problem, 1)
    assert step["answer"] == "solution"
    response_format = step["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert schema["minItems"] == schema["maxItems"] == 3
    radius = schema["items"]["prefixItems"][2]
    assert radius["maximum"] == 0.5 and radius["minimum"] > 0  # only what every valid packing meets


def test_a_problem_without_a_schema_asks_for_free_text(tmp_path: Path) -> None:
    source = "def evaluate(solution):\n    return {'score': 1.0, 'valid': True, 'details': 'ok'}\n"
    problem = load_problem(str(_directory(tmp_path, source)))
    assert problem.solution_schema is None
    assert next_step(seed_archive(problem), problem, 1)["response_format"] is None


def test_a_solution_schema_must_be_an_object_of_a_json_problem(tmp_path: Path) -> None:
    source = "def evaluate(solution):\n    return {'score': 1.0, 'valid': True, 'details': 'ok'}\n"
    directory = _directory(tmp_path, source)
    spec = json.loads((directory / "problem.json").read_text())
    (directory / "problem.json").write_text(json.dumps({**spec, "solution_schema": "an array"}))
    with pytest.raises(ProblemError, match="solution_schema"):
        load_problem(str(directory))


def test_the_circle_packing_schema_never_excludes_a_valid_packing() -> None:
    """Every bound in the schema follows from validity: r <= 1/2 and r <= x, y <= 1 - r, at 2 decimals."""
    problem = load_problem("circle-packing", {"n": 1, "answer": "list"})
    centre, _, radius = problem.solution_schema["items"]["prefixItems"]  # type: ignore[index]
    for r100 in range(1, 51):
        for x100 in range(r100, 101 - r100):
            r, x = r100 / 100, x100 / 100
            assert radius["minimum"] <= r <= radius["maximum"] and centre["minimum"] <= x <= centre["maximum"]
    assert problem.best_known == 0.5 and "erich-friedman" in (problem.best_known_source or "")
    assert load_problem("circle-packing", {"n": 7}).best_known is None  # nothing found here, nothing claimed


def test_a_circle_packing_answer_is_an_edit_of_its_parent_by_default() -> None:
    problem = load_problem("circle-packing", {"n": 6})
    seed = problem.seeds[0]  # a 3 x 2 grid of radius 0.16: each circle has 0.01 to spare sideways, more vertically
    step = next_step(seed_archive(problem), problem, 1)
    assert step["answer"] == "edit" and step["response_format"]["json_schema"]["name"] == "edit"
    schema = step["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["circle"]["enum"] == list(range(6)) and "grow" in schema["properties"]["change"]["enum"]
    grown = json.loads(problem.extract('{"circle": 0, "change": "grow"}', seed) or "null")
    assert grown[0] == [0.17, 0.25, 0.17] and grown[1:] == json.loads(seed)[1:]  # as large as the wall allows
    # Moved down, circle 1 is further from its neighbours, and a move fits the circle to its new place: it grows.
    moved = problem.extract('{"circle": 1, "change": "down"}', seed)
    assert json.loads(moved or "null")[1] == [0.5, 0.2, 0.17]
    assert evaluate_attempt(problem, moved).score == pytest.approx(0.97)
    assert problem.extract('{"circle": 1, "change": "grow"}', moved) is None  # already as large as its place allows
    # Moved towards the wall, circle 0 shrinks to fit: a valid packing, a lower score.
    shrunk = json.loads(problem.extract('{"circle": 0, "change": "left"}', seed) or "null")
    assert shrunk[0] == [0.12, 0.25, 0.12] and evaluate_attempt(problem, json.dumps(shrunk)).score == pytest.approx(
        0.92
    )


def test_an_edit_that_cannot_be_applied_holds_no_solution() -> None:
    problem = load_problem("circle-packing", {"n": 6})
    seed = problem.seeds[0]
    assert problem.extract('{"circle": 6, "change": "grow"}', seed) is None  # no circle 6
    assert problem.extract('{"circle": 0, "change": "explode"}', seed) is None
    assert problem.extract('{"circle": 0, "change": "grow"}') is None  # no parent to edit
    assert "no edit that changes the parent" in evaluate_attempt(problem, None).details
    assert problem.extract("grow circle 0", seed) is None
    grown = problem.extract('{"circle": 0, "change": "grow"}', seed)
    assert problem.extract('{"circle": 0, "change": "grow"}', grown) is None  # it touches the wall: no change
    # A move that leaves the circle no room (its centre inside another circle, or past a wall) is no edit.
    pair = load_problem("circle-packing", {"n": 2})
    assert pair.extract('{"circle": 0, "change": "right"}', "[[0.3,0.5,0.05],[0.5,0.5,0.2]]") is None
    assert pair.extract('{"circle": 0, "change": "left"}', "[[0.03,0.5,0.03],[0.5,0.5,0.2]]") is None


def test_fine_moves_offer_each_direction_at_four_step_sizes() -> None:
    coarse = load_problem("circle-packing", {"n": 6})
    fine = load_problem("circle-packing", {"n": 6, "moves": "fine"})
    assert fine.edit_schema is not None and coarse.edit_schema is not None
    menu = fine.edit_schema["properties"]["change"]["enum"]
    assert len(menu) == 17 and menu[0] == "grow" and "left 0.02" in menu and "down 0.1" in menu
    assert coarse.edit_schema["properties"]["change"]["enum"] == ["grow", "left", "right", "up", "down"]
    seed = fine.seeds[0]
    # Circle 1 of the 3 x 2 grid moved down by 0.02 instead of 0.05: a smaller step, fitted to its new place.
    moved = json.loads(fine.extract('{"circle": 1, "change": "down 0.02"}', seed) or "null")
    assert moved[1][:2] == [0.5, 0.23] and moved[1][2] > 0.16
    assert fine.extract('{"circle": 1, "change": "down"}', seed) is None  # the coarse name is not on the fine menu
    assert len(fine.useful_edits(seed) or []) > len(coarse.useful_edits(seed) or [])  # still enumerable: narrowed
    assert "0.01, 0.02, 0.05, 0.1" in fine.prompt(seed, 0.96)
    with pytest.raises(ValueError, match="moves must be 'coarse' or 'fine'"):
        load_problem("circle-packing", {"moves": "tiny"})
    with pytest.raises(ValueError, match="moves must be"):
        load_problem("circle-packing", {"moves": "tiny", "answer": "list"})


def test_a_problem_directory_may_ask_for_edits(tmp_path: Path) -> None:
    edit = {"type": "object", "properties": {"add": {"type": "integer"}}, "required": ["add"]}
    source, directory = _edit_directory(tmp_path, "solution + [edit['add']]", edit)
    problem = load_problem(str(directory))
    expected = {"name": "edit", "strict": True, "schema": edit}
    assert problem.response_format() == {"type": "json_schema", "json_schema": expected}
    assert problem.extract('{"add": 2}', "[1]") == "[1,2]"
    assert problem.extract('{"take": 2}', "[1]") is None  # apply_edit raised KeyError: no solution

    (directory / "evaluate.py").write_text(source.split("def apply_edit")[0])
    with pytest.raises(ProblemError, match="apply_edit"):
        load_problem(str(directory))


def test_only_edits_that_change_the_parent_are_offered() -> None:
    problem = load_problem("circle-packing", {"n": 6})
    seed = problem.seeds[0]
    useful = problem.useful_edits(seed) or []
    assert {"circle": 0, "change": "grow"} in useful and {"circle": 1, "change": "down"} in useful
    grown = problem.extract('{"circle": 0, "change": "grow"}', seed) or ""
    narrowed = problem.useful_edits(grown) or []
    assert {"circle": 0, "change": "grow"} not in narrowed  # it touches the wall now: growing changes nothing
    assert all(problem.extract(json.dumps(edit), grown) is not None for edit in narrowed)
    schema = problem.response_format(grown)["json_schema"]["schema"]  # type: ignore[index]
    assert len(schema["anyOf"]) == len(narrowed) and schema["anyOf"][0]["properties"]["circle"] == {"const": 0}
    assert problem.response_format()["json_schema"]["schema"] == problem.edit_schema  # type: ignore[index]
    # The plan carries each parent's narrowed format; the step's own is the whole schema.
    parent = next_step(seed_archive(problem), problem, 1)["parents"][0]
    assert parent["response_format"] == problem.response_format(seed)
    # Not enumerable (no enums, or too many edits): the schema is not narrowed.
    assert load_problem("circle-packing", {"n": 6, "answer": "list"}).useful_edits(seed) is None


def test_an_apply_edit_that_fails_unexpectedly_leaves_the_schema_whole(tmp_path: Path) -> None:
    edit = {"type": "object", "properties": {"add": {"type": "integer", "enum": [0, 1, 2]}}, "required": ["add"]}
    _, directory = _edit_directory(tmp_path, "solution + [1 / (edit['add'] - 1)]", edit)
    problem = load_problem(str(directory))
    assert problem.useful_edits(problem.seeds[0]) is None  # add=1 divides by zero: not an edit `extract` knows
    assert problem.response_format(problem.seeds[0])["json_schema"]["schema"] == edit  # type: ignore[index]


def _edit_directory(tmp_path: Path, edited: str, edit_schema: dict[str, Any]) -> tuple[str, Path]:
    """A problem directory whose answers are edits: `apply_edit` returns the expression `edited`."""
    source = (
        "def evaluate(solution):\n    return {'score': sum(solution), 'valid': True, 'details': 'ok'}\n"
        f"def apply_edit(solution, edit):\n    return {edited}\n"
    )
    directory = _directory(tmp_path, source)
    spec = json.loads((directory / "problem.json").read_text())
    (directory / "problem.json").write_text(json.dumps({**spec, "edit_schema": edit_schema}))
    return source, directory
