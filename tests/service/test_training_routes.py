"""Training control through HTTP and the CLI against a real `reef serve` (fake upstream, the file recipe, tokens on):
the contract, the training mode, requested steps with `reef train --wait`, and every refusal naming its field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from reef.cli.main import main as reef_cli
from tests.fakes.reef_process import ReefProcess, wait_considered
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.e2e

TOKEN = "training-token"
S = "ops"
AUTH = {"authorization": f"Bearer {TOKEN}"}
TASKS = [{"prompt": "hello", "checker": "contains", "answer": "echo"}]


@pytest.fixture(scope="module")
def server(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    flags = [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "tests.fakes.learning_recipe:FileRecipe",
        "--learning.batch-size", "4",
        "--learning.poll-interval-s", "0.2",
        "--evaluation.policy", "always",
        "--reef.tokens", f"[{TOKEN}]",
    ]  # fmt: skip
    with ReefProcess(tmp_path_factory.mktemp("training"), *flags) as process:
        with httpx.Client(base_url=process.url, headers=AUTH, timeout=30) as client:
            assert client.post("/reef/scenarios", json={"name": S}).status_code == 201
            assert client.post(f"/reef/scenarios/{S}/tasks", json={"tasks": TASKS}).status_code == 201
        yield process


@pytest.fixture()
def api(server: ReefProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        yield client


def _report(api: httpx.Client, prompt: str, answer: str) -> str:
    body = {"feedback": {"prompt": prompt, "answer": answer}}
    response = api.post("/reef/report", json=body, headers={"x-reef-scenario": S})
    assert response.status_code == 200, response.text
    return str(response.json()["agent_record_id"])


def _cli(server: ReefProcess, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = reef_cli([*argv, "--url", server.url, "--token", TOKEN])
    return code, capsys.readouterr().out


def _error(response: httpx.Response) -> dict[str, Any]:
    return dict(response.json()["error"])


def test_the_contract_names_the_recipe_its_report_schema_and_how_it_trains(api: httpx.Client) -> None:
    contract = api.get(f"/reef/scenarios/{S}/contract").json()
    assert (contract["recipe"], contract["learns"], contract["training_mode"]) == ("files", True, "auto")
    assert (contract["paused"], contract["requested"], contract["batch_size"]) == (False, None, 4)
    assert contract["gate"]["source"] == "api" and contract["gate"]["tasks"] == 1
    schema = contract["report_schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"score": 1.0, "references": [], "feedback": "ok"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"score": 1.0, "colour": "red"}, schema)  # the server refuses unknown fields too


def test_an_unknown_training_mode_is_a_400_naming_the_field_and_changes_nothing(api: httpx.Client) -> None:
    refused = api.post(f"/reef/scenarios/{S}/update", json={"training_mode": "sometimes"})
    assert refused.status_code == 400 and "training_mode" in _error(refused)["message"]
    empty = api.post(f"/reef/scenarios/{S}/update", json={})
    assert empty.status_code == 400 and "training_mode" in _error(empty)["message"]
    assert api.get(f"/reef/scenarios/{S}/contract").json()["training_mode"] == "auto"


def test_a_train_request_in_auto_mode_is_a_409_and_bad_bodies_are_400s(api: httpx.Client) -> None:
    refused = api.post("/reef/train", json={}, headers={"x-reef-scenario": S})
    assert refused.status_code == 409 and "training_mode auto" in _error(refused)["message"]
    unknown = api.post("/reef/train", json={"txt": "typo"}, headers={"x-reef-scenario": S})
    assert unknown.status_code == 400 and "txt" in _error(unknown)["message"]
    no_scenario = api.post("/reef/train", json={})
    assert no_scenario.status_code == 400 and "x-reef-scenario" in _error(no_scenario)["message"]
    missing = api.post("/reef/train", json={}, headers={"x-reef-scenario": "never-created"})
    assert missing.status_code == 404


def test_the_cli_sets_manual_mode_and_a_requested_step_trains_on_half_a_batch(
    server: ReefProcess, api: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _cli(server, capsys, "training", S, "--mode", "manual")
    assert code == 0 and "training_mode manual" in out
    first = _report(api, "capital of France?", "Paris")  # one of four: auto would wait
    wait_considered(api, S, api.get(f"/reef/scenarios/{S}/records/{first}").json()["sequence"])
    assert api.get(f"/reef/scenarios/{S}/commits").json()["commits"] == []

    code, out = _cli(server, capsys, "train", S, "keep answers short", "--wait", "--timeout-s", "60")

    assert code == 0 and "queued" in out and "published" in out, out
    (commit,) = api.get(f"/reef/scenarios/{S}/commits", params={"record_id": first}).json()["commits"]
    assert commit["verdict"] == "published" and commit["metrics"]["request"]["text"] == "keep answers short"
    assert api.get(f"/reef/scenarios/{S}/contract").json()["requested"] is None


def test_the_cli_pauses_and_a_request_while_paused_is_refused_with_the_servers_message(
    server: ReefProcess, api: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _cli(server, capsys, "training", S, "--pause")
    assert code == 0 and "paused" in out
    _report(api, "largest ocean?", "Pacific")

    code, out = _cli(server, capsys, "train", S)

    assert code == 1 and out.startswith("reef: 409") and "paused" in out
    code, _ = _cli(server, capsys, "training", S, "--resume", "--mode", "auto")
    assert code == 0
    contract = api.get(f"/reef/scenarios/{S}/contract").json()
    assert (contract["training_mode"], contract["paused"]) == ("auto", False)


def test_the_console_page_is_open_but_its_data_and_actions_need_the_token(server: ReefProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        page = anonymous.get("/console")
        assert page.status_code == 200 and "<html" in page.text and TOKEN not in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert anonymous.get("/console/app.js").status_code == 200
        for escape in ("/console/..%2Fpyproject.toml", "/console/%2E%2E%2Fpyproject.toml", "/console/index.py"):
            assert anonymous.get(escape).status_code == 404, escape
        for method, path, body in [
            ("GET", f"/reef/scenarios/{S}/contract", None),
            ("GET", f"/reef/scenarios/{S}/records", None),
            ("POST", f"/reef/scenarios/{S}/update", {"paused": True}),
            ("POST", f"/reef/scenarios/{S}/rollback", {"release_id": "x"}),
        ]:
            assert anonymous.request(method, path, json=body).status_code == 401, path
        assert anonymous.post("/reef/train", json={}, headers={"x-reef-scenario": S}).status_code == 401


def test_a_scenario_that_does_not_learn_refuses_training_control_naming_it(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    flags = ["--inference.upstream-url", upstream.url, "--inference.upstream-model", "fake-model"]
    with ReefProcess(tmp_path, *flags) as basic, httpx.Client(base_url=basic.url, timeout=30) as client:
        assert client.post("/reef/scenarios", json={"name": "plain"}).status_code == 201
        refused = client.post("/reef/train", json={"text": "learn"}, headers={"x-reef-scenario": "plain"})
        assert refused.status_code == 409
        assert "basic" in _error(refused)["message"] and "plain" in _error(refused)["message"]
        update = client.post("/reef/scenarios/plain/update", json={"training_mode": "manual"})
        assert update.status_code == 409 and "does not learn" in _error(update)["message"]
        contract = client.get("/reef/scenarios/plain/contract").json()
        assert (contract["recipe"], contract["learns"], contract["training_mode"]) == ("basic", False, None)
