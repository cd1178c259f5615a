"""Gate tasks without a file on the server: tasks given through the API, else a held-out split of the scenario's
own feedback (reports with a known answer), stable across restarts and never trained on."""

from __future__ import annotations

import json
import time

import pytest

from reef.core.errors import BadRequest
from reef.core.records import Record
from tests.fakes.learning_recipe import CitingDemoRecipe
from tests.fakes.learning_world import EVERY, QUESTIONS, make_world, report_id, started
from tests.fakes.training_backend import FakeTrainingBackend

Q = list(QUESTIONS)


def ask_and_demonstrate(world, prompt, answer, held_out, taken, scenario="math"):
    """An answered chat request and a report citing it with the right answer; returns the report's id."""
    request = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
    (inference,) = world.records.append(
        [Record.new(scenario, "inference", {"dialect": "chat", "request": request}, created_at=time.time())]
    )
    payload = {"references": [inference.agent_record_id], "metadata": {"demonstration": answer}}
    rid = report_id(held_out, taken)
    world.records.append([Record.new(scenario, "report", payload, created_at=time.time(), agent_record_id=rid)])
    world.runtime.notify(scenario)
    return rid


def unconsumed(world, scenario="math"):
    return {r.agent_record_id for r in world.records.page(scenario, 0, 1000) if r.consumed_step is None}


async def test_with_no_tasks_the_gate_waits_for_its_held_out_split_and_says_why(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    taken: set[str] = set()
    ask_and_demonstrate(world, Q[0], QUESTIONS[Q[0]], True, taken)
    for q in Q[1:3]:
        ask_and_demonstrate(world, q, QUESTIONS[q], False, taken)

    commit = await world.runtime.step("math")

    gate = world.runtime.status()["scenarios"]["math"]["gate"]
    assert commit["verdict"] == "skipped" and "held-out split" in commit["reason"]
    assert gate["source"] == "held_out" and gate["tasks"] == 1 and gate["holdout_min_tasks"] == 4
    assert gate["scoring"] == "checker"
    assert "waiting" in gate["waiting"] and world.backend.jobs == []


async def test_the_held_out_split_gates_training_is_never_trained_on_and_survives_a_restart(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    taken: set[str] = set()
    # Every question is asked twice: once held out (the gate asks it), once for training.
    held = [ask_and_demonstrate(world, q, QUESTIONS[q], True, taken) for q in Q]
    trained = [ask_and_demonstrate(world, q, QUESTIONS[q], False, taken) for q in Q[:2]]

    commit = await world.runtime.step("math")

    assert commit["verdict"] == "published", commit["reason"]
    assert commit["candidate_scores"] == [1.0, 1.0, 0.0, 0.0] and commit["current_scores"] == [0.0] * 4
    assert set(world.backend.trained_record_ids()) == set(trained)
    assert set(held) <= unconsumed(world)  # held out: never consumed, so a restart finds them again
    tasks = world.runtime.tasks("math")
    assert tasks["gate"] == {"source": "held_out", "tasks": 4} and tasks["tasks"] == []
    await world.runtime.stop()

    world = world.restart(backend=FakeTrainingBackend())
    await world.runtime.start()
    for q in Q[2:]:
        ask_and_demonstrate(world, q, QUESTIONS[q], False, taken)
    after = await world.runtime.step("math")

    assert after["verdict"] == "published" and after["candidate_scores"] == [1.0] * 4
    assert [t.task_id for t in world.runtime.gate_tasks("math").tasks] == held
    assert not set(held) & set(world.backend.trained_record_ids())


async def test_tasks_posted_through_the_api_drive_the_gate_and_end_the_held_out_split(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    taken: set[str] = set()
    held = ask_and_demonstrate(world, Q[3], QUESTIONS[Q[3]], True, taken)
    body = {"tasks": [{"prompt": q, "checker": "exact", "answer": a} for q, a in QUESTIONS.items()]}

    added = await world.runtime.add_tasks("math", json.dumps(body).encode())
    for q in Q[:2]:
        ask_and_demonstrate(world, q, QUESTIONS[q], False, taken)
    commit = await world.runtime.step("math")

    assert added["added"] == 4 and added["gate"] == {"source": "api", "tasks": 4}
    assert [row["id"] for row in world.runtime.tasks("math")["tasks"]] == ["task-1", "task-2", "task-3", "task-4"]
    # The first batch: the earlier held-out report (trained on now) and the first of the new ones.
    assert commit["verdict"] == "published" and commit["candidate_scores"] == [1.0, 0.0, 0.0, 1.0]
    # With tasks of its own the scenario holds nothing out: the earlier held-out report is trained on now.
    assert held in world.backend.trained_record_ids()


async def test_api_tasks_survive_a_restart(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    jsonl = "".join(
        json.dumps({"id": f"q{i}", "prompt": q, "answer": a}) + "\n" for i, (q, a) in enumerate(QUESTIONS.items())
    )
    await world.runtime.add_tasks("math", jsonl.encode())
    await world.runtime.stop()

    world = world.restart()
    await world.runtime.start()

    assert [t.task_id for t in world.runtime.gate_tasks("math").tasks] == ["q0", "q1", "q2", "q3"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"tasks": [{"prompt": "p", "checker": "exact"}]}', "tasks[0].answer"),
        (b'{"tasks": [{"prompt": "p", "checker": "fuzzy", "answer": "a"}]}', "tasks[0].checker"),
        (b'{"prompt": "p", "answer": "a"}\n{"prompt": "q", "answer": "b"\n', "line 2"),
        (b'{"prompt": "p", "answer": "a"}\n{"answer": "b"}\n', "line 2.prompt"),
        (b'{"tasks": []}', "tasks"),
        (b'{"tasks": [{"prompt": "p", "answer": "a"}], "extra": 1}', "extra"),
        (b'{"tasks": [{"prompt": "p", "answer": "a", "max_tokens": 0}]}', "tasks[0].max_tokens"),
        (b'{"tasks": [{"prompt": "p", "checker": "regex", "pattern": "("}]}', "tasks[0].pattern"),
        (b'{"tasks": [{"messages": [{"content": "hi"}], "answer": "a"}]}', "tasks[0].messages[0]"),
        (b"[1, 2]", "line 1"),
        (b"", "tasks"),
    ],
)
async def test_a_bad_task_is_refused_naming_its_line_and_field_and_nothing_is_stored(tmp_path, body, field):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    await world.runtime.add_tasks("math", b'{"id": "kept", "prompt": "p", "answer": "a"}')

    with pytest.raises(BadRequest) as refused:
        await world.runtime.add_tasks("math", body)

    assert refused.value.field == field
    assert [row["id"] for row in world.runtime.tasks("math")["tasks"]] == ["kept"]


async def test_a_tasks_body_over_the_size_limit_is_refused(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    limit = world.settings.evaluation.max_tasks_bytes
    line = json.dumps({"prompt": "x" * 1000, "answer": "a"}) + "\n"
    body = (line * (limit // len(line) + 1)).encode()

    with pytest.raises(BadRequest) as refused:
        await world.runtime.add_tasks("math", body)

    assert refused.value.field == "tasks" and "over the limit" in refused.value.message
    assert world.runtime.tasks("math")["tasks"] == []


async def test_a_repeated_task_id_is_refused(tmp_path):
    world = await started(make_world(tmp_path, CitingDemoRecipe, tasks=None))
    await world.runtime.add_tasks("math", b'{"id": "a", "prompt": "p", "answer": "1"}')

    with pytest.raises(BadRequest) as refused:
        await world.runtime.add_tasks(
            "math", b'{"id": "b", "prompt": "p", "answer": "1"}\n{"id": "a", "prompt": "q", "answer": "2"}'
        )

    assert refused.value.field == "line 2.id"
    assert [row["id"] for row in world.runtime.tasks("math")["tasks"]] == ["a"]


def test_sft_holds_out_a_reported_prompt_with_its_demonstration_as_an_f1_gate_task():
    from reef.recipes.sft import SFTProcessor

    processor = SFTProcessor(units_per_batch=1)
    processor.hold_out(EVERY)
    taken: set[str] = set()
    rows = []
    for index, tools in enumerate([None, [{"type": "function", "function": {"name": "f"}}]]):
        request = {"messages": [{"role": "user", "content": f"q{index}"}], **({"tools": tools} if tools else {})}
        inference = Record.new("s", "inference", {"dialect": "chat", "request": request}, created_at=0.0)
        payload = {"references": [inference.agent_record_id], "metadata": {"demonstration": "Paris"}}
        report = Record.new("s", "report", payload, created_at=0.0, agent_record_id=report_id(True, taken))
        processor.ingest(inference)
        processor.ingest(report)
        rows.append(report.agent_record_id)

    (task,) = processor.gate_tasks()
    assert task["id"] == rows[0] and task["checker"] == "f1" and task["answer"] == "Paris"
    assert task["messages"] == [{"role": "user", "content": "q0"}] and task["max_tokens"] == 17
    assert processor.ready() == 1  # the prompt with tools cannot be asked by the gate: it is trained on instead
