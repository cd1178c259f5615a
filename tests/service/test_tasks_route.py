"""`POST/GET/DELETE /reef/scenarios/{s}/tasks` against a real `reef serve`: gate tasks given through the API."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.service.conftest import scenario_headers

pytestmark = pytest.mark.e2e


def test_tasks_posted_as_json_or_jsonl_are_listed_with_their_ids(http: httpx.Client):
    first = http.post(
        "/reef/scenarios/tasks-a/tasks",
        json={
            "tasks": [
                {"prompt": "2 + 2 =", "checker": "numeric", "answer": 4},
                {"id": "cap", "prompt": "Capital of France?", "checker": "contains", "answer": "Paris"},
            ]
        },
    )
    jsonl = '{"messages": [{"role": "user", "content": "Say hi"}], "checker": "regex", "pattern": "^hi"}\n\n'
    second = http.post("/reef/scenarios/tasks-a/tasks", content=jsonl, headers={"content-type": "application/jsonl"})
    listed = http.get("/reef/scenarios/tasks-a/tasks")

    assert first.status_code == 201, first.text
    assert first.json()["added"] == 2 and second.json()["added"] == 1
    assert [t["id"] for t in listed.json()["tasks"]] == ["task-1", "cap", "task-3"]
    assert listed.json()["gate"] == {"source": "api", "tasks": 3}


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"tasks": [{"prompt": "p", "checker": "exact"}]}, "tasks[0].answer"),
        (
            {"tasks": [{"prompt": "p", "answer": "a"}, {"prompt": "q", "checker": "nope", "answer": "b"}]},
            "tasks[1].checker",
        ),
        ('{"prompt": "p", "answer": "a"}\nnot json\n', "line 2"),
        ({"tasks": "all of them"}, "tasks"),
    ],
)
def test_a_bad_task_is_a_400_naming_the_task_and_field_and_stores_nothing(http: httpx.Client, body, named):
    http.post("/reef/scenarios/tasks-b/tasks", json={"tasks": [{"id": "good", "prompt": "p", "answer": "a"}]})
    content = body if isinstance(body, str) else json.dumps(body)

    response = http.post("/reef/scenarios/tasks-b/tasks", content=content)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith(f"{named}:")
    assert [t["id"] for t in http.get("/reef/scenarios/tasks-b/tasks").json()["tasks"]] == ["good"]


def test_deleting_the_tasks_forgets_them(http: httpx.Client):
    http.post("/reef/scenarios/tasks-c/tasks", json={"tasks": [{"prompt": "p", "answer": "a"}]})

    removed = http.delete("/reef/scenarios/tasks-c/tasks")

    assert removed.json()["removed"] == 1
    assert http.get("/reef/scenarios/tasks-c/tasks").json()["tasks"] == []


def test_listing_the_tasks_of_an_unknown_scenario_is_a_404(http: httpx.Client):
    assert http.get("/reef/scenarios/never-made/tasks").status_code == 404
    assert http.get("/reef/status", headers=scenario_headers("x")).status_code == 200
