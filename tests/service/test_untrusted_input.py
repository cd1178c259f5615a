"""Input from traffic never runs code unless the operator allows it, and never names a path outside its directory:
every code-running task field is refused without `evaluation.allow_api_code`, and every place that joins a
client's name into a filesystem path refuses `.`, `..`, `/`, `\\` and NUL, naming the field, storing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef.coordination.election import FileElection
from reef.core.errors import BadRequest
from reef.core.path_names import check_path_name, path_component
from reef.core.scenarios import validate_scenario_name
from reef.core.settings import EvaluationSettings, Settings, StorageSettings
from reef.harness.admission import admit_node
from reef.harness.agent_gate import AgentEvaluator
from reef.harness.episodes import EpisodeResult
from reef.harness.proposals import ProposalQueue
from reef.harness.render import write_files
from reef.harness.tree import Node
from reef.learning.evaluation.agent_tasks import parse_check, parse_workspace
from reef.learning.evaluation.task_store import TaskStore
from reef.learning.evaluation.tasks import load_tasks, parse_task
from reef.releases.commit_log import FileCommitLog
from tests.fakes.service_app import in_process_client

TRAVERSALS = ["..", ".", "x/../../../../escaped", "a\\b", "a\0b", "/etc/passwd"]


async def _client(tmp_path: Path, evaluation: EvaluationSettings) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), evaluation=evaluation)
    async for http in in_process_client(settings, tmp_path):
        yield http


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(tmp_path, EvaluationSettings()):
        yield client


CODE_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"prompt": "p", "checker": "os:system", "answer": "a"}, "tasks[0].checker"),
    ({"prompt": "p", "check": {"command": "cat /etc/passwd"}}, "tasks[0].check.command"),
    ({"prompt": "p", "check": {"file": "f", "contains": "x"}, "workspace": {"dir": "/"}}, "tasks[0].workspace.dir"),
]


@pytest.mark.parametrize(("task", "field"), CODE_FIELDS)
async def test_a_task_field_that_runs_code_is_refused_through_the_api_by_default(http, task, field) -> None:
    response = await http.post("/reef/scenarios/code/tasks", json={"tasks": [task]})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith(field) and "evaluation.allow_api_code" in message
    assert (await http.get("/reef/scenarios/code/tasks")).json()["tasks"] == []
    assert (await http.get("/healthz")).status_code == 200  # and the server keeps serving


async def test_with_the_flag_a_checker_must_live_in_a_listed_module(tmp_path: Path) -> None:
    allowed = EvaluationSettings(allow_api_code=True, checker_modules=["tests.fakes"])
    async for http in _client(tmp_path, allowed):
        refused = await http.post("/reef/scenarios/c/tasks", json={"tasks": [CODE_FIELDS[0][0]]})
        assert refused.status_code == 400 and "evaluation.checker_modules" in refused.text
        listed = {"prompt": "p", "checker": "tests.fakes.evaluation:shout_checker", "answer": "a"}
        command = {"prompt": "p", "check": {"command": "true"}}
        accepted = await http.post("/reef/scenarios/c/tasks", json={"tasks": [listed, command]})
        assert accepted.status_code == 201, accepted.text


def test_the_operators_task_file_may_still_run_code(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"prompt": "p", "check": {"command": "true"}, "workspace": {"dir": "' + str(tmp_path) + '"}}\n')
    [task] = load_tasks(path, "s")
    assert task.check is not None and task.check.command == ["sh", "-c", "true"]


@pytest.mark.parametrize("name", TRAVERSALS)
async def test_a_traversal_task_id_is_refused_and_nothing_is_stored(http, name) -> None:
    response = await http.post(
        "/reef/scenarios/ids/tasks", json={"tasks": [{"id": name, "prompt": "p", "answer": "a"}]}
    )
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("tasks[0].id")
    assert (await http.get("/reef/scenarios/ids/tasks")).json()["tasks"] == []


async def test_dotted_names_stay_legal(http) -> None:
    assert check_path_name("heldout.jsonl:3", "id") == "heldout.jsonl:3"
    assert validate_scenario_name("my.scenario") == "my.scenario"
    created = await http.post("/reef/scenarios", json={"name": "my.scenario"})
    assert created.status_code in (200, 201), created.text


@pytest.mark.parametrize("name", ["..", "."])
async def test_a_scenario_named_dot_or_dot_dot_is_refused(http, name) -> None:
    response = await http.post("/reef/scenarios", json={"name": name})
    assert response.status_code == 400 and "name" in response.json()["error"]["message"]
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    relayed = await http.post("/v1/chat/completions", json=chat, headers={"x-reef-scenario": name})
    assert relayed.status_code == 400 and "x-reef-scenario" in relayed.json()["error"]["message"]


@pytest.mark.parametrize("name", TRAVERSALS)
def test_every_path_built_from_a_client_name_refuses_traversal(tmp_path: Path, name: str) -> None:
    """Each place that joins a client-given name into a filesystem path, walked with the same bad names."""
    places = [
        lambda: validate_scenario_name(name),
        lambda: TaskStore(tmp_path / "tasks").rows(name),
        lambda: FileCommitLog(tmp_path / "commits").path(name),
        lambda: FileElection(tmp_path / "leaders")._path(name),
        lambda: ProposalQueue(tmp_path / "proposals").path(name),
        lambda: parse_task({"id": name, "prompt": "p", "answer": "a"}, "t"),
        lambda: parse_workspace({"files": {name: "x"}}, "workspace"),
        lambda: parse_check({"file": name, "contains": "x"}, "check"),
        lambda: path_component(name),
        lambda: admit_node(Node("n", "skill", {"name": name, "description": "d", "text": "t"})),
        lambda: write_files({f"skills/{name}/../../../../escaped": "x"}, tmp_path / "agent"),
    ]
    for index, place in enumerate(places):
        with pytest.raises(BadRequest):
            place()
            pytest.fail(f"place {index} accepted {name!r}")
    assert not any(tmp_path.rglob("escaped*"))


def test_an_episode_trajectory_lands_under_the_state_directory(tmp_path: Path) -> None:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"))
    evaluator = AgentEvaluator(settings, lambda s: None, lambda s, r: None, episodes=object())  # type: ignore[arg-type]
    run = EpisodeResult("a", 0, False, [], [], True, 0.1)
    relative = evaluator._store_trajectory("a:b", "e1-heldout.jsonl:3-candidate", run)
    stored = (tmp_path / "state" / relative).resolve()
    assert stored.is_file() and stored.is_relative_to((tmp_path / "state" / "episodes").resolve())
    with pytest.raises(BadRequest):
        evaluator._store_trajectory("s", "x/../../../../escaped", run)
