"""Export a scenario from one real `reef serve`, import the file into another with the reference client's CLI
(`python -m reef_client import`), and find the same records there: ids, types, payloads, hashes, citations."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.e2e

A, B = "audit-a", "audit-b"


@pytest.fixture(scope="module")
def second(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    state = tmp_path_factory.mktemp("reef-second")
    with ReefProcess(
        state, "--inference.upstream-url", upstream.url, "--inference.upstream-model", "fake-model"
    ) as proc:
        yield proc


def all_records(http: httpx.Client, scenario: str) -> list[dict[str, Any]]:
    """Every record of `scenario` with its payload, walking the pages until the cursor is null."""
    found, cursor = [], 0
    while cursor is not None:
        page = http.get(f"/reef/scenarios/{scenario}/records", params={"after_sequence": cursor, "limit": 4}).json()
        found += [
            http.get(f"/reef/scenarios/{scenario}/records/{row['agent_record_id']}").json() for row in page["records"]
        ]
        cursor = page["next_after_sequence"]
    return found


def run_import(path: Path, url: str, scenario: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "reef_client", "import", str(path), "--url", url, "--scenario", scenario, *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_an_exported_scenario_imports_unchanged_into_another_server(
    reef: ReefProcess, second: ReefProcess, tmp_path: Path
) -> None:
    with httpx.Client(base_url=reef.url, timeout=30) as one, httpx.Client(base_url=second.url, timeout=30) as two:
        receipts = []
        for n in range(5):
            body = {"model": "fake-model", "messages": [{"role": "user", "content": f"question {n} ünï"}]}
            answer = one.post("/v1/chat/completions", headers={"x-reef-scenario": A}, json=body)
            assert answer.status_code == 200, answer.text
            receipts.append(answer.headers["x-reef-agent-record-id"])
        for index, cited in enumerate([receipts[:2], receipts[2:3], []]):
            body = {"score": index / 2, "feedback": f"report {index}", "references": cited}
            assert one.post("/reef/report", headers={"x-reef-scenario": A}, json=body).status_code == 200
        source = all_records(one, A)
        assert len(source) == 8

        export = tmp_path / "a.jsonl"
        with one.stream("GET", f"/reef/scenarios/{A}/records/export") as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/x-ndjson"
            assert response.headers["x-reef-export-records"] == "8"
            with export.open("wb") as file:
                for chunk in response.iter_bytes():
                    file.write(chunk)
        lines = [orjson.loads(line) for line in export.read_bytes().splitlines()]
        assert [line["agent_record_id"] for line in lines] == [r["agent_record_id"] for r in source]

        # Batches of 3: each report lands after the inferences it cites, as in the source.
        imported = run_import(export, second.url, B, "--batch-size", "3")
        assert imported.returncode == 0, imported.stderr + imported.stdout
        assert "8 records acknowledged" in imported.stdout

        copied = all_records(two, B)
        keys = ("agent_record_id", "request_type", "payload", "content_hash", "references", "score", "release_id")
        assert [{k: r[k] for k in keys} for r in copied] == [{k: r[k] for k in keys} for r in source]
        assert all(r["scenario"] == B for r in copied)
        by_id = {r["agent_record_id"]: r for r in copied}
        assert by_id[receipts[0]]["cited_by"] == by_id[receipts[1]]["cited_by"] == [copied[5]["agent_record_id"]]
        assert by_id[receipts[4]]["cited_by"] == []

        # The imported inferences are receipts of B now: a new report may cite them.
        cites = two.post("/reef/report", headers={"x-reef-scenario": B}, json={"score": 1, "references": receipts[3:]})
        assert cites.status_code == 200, cites.text
        assert two.get(f"/reef/scenarios/{B}/records/{receipts[3]}").json()["cited_by"] == [
            cites.json()["agent_record_id"]
        ]

        # Importing the same file again (a fresh checkpoint) is an idempotent retry: acknowledged, nothing added.
        again = run_import(export, second.url, B, "--progress", str(tmp_path / "again.json"))
        assert again.returncode == 0, again.stderr + again.stdout
        assert len(all_records(two, B)) == 9


def test_the_export_of_an_unknown_scenario_is_a_404_naming_it(reef: ReefProcess) -> None:
    response = httpx.get(f"{reef.url}/reef/scenarios/never-made/records/export", timeout=30)
    assert response.status_code == 404
    assert "never-made" in response.json()["error"]["message"]


def test_an_export_imports_into_another_scenario_of_the_same_server_keeping_its_ids(
    reef: ReefProcess, tmp_path: Path
) -> None:
    source_scenario, copy_scenario = "cross-source", "cross-copy"
    with httpx.Client(base_url=reef.url, timeout=30) as http:
        receipts = []
        for n in range(3):
            body = {"model": "fake-model", "messages": [{"role": "user", "content": f"cross {n}"}]}
            answer = http.post("/v1/chat/completions", headers={"x-reef-scenario": source_scenario}, json=body)
            assert answer.status_code == 200, answer.text
            receipts.append(answer.headers["x-reef-agent-record-id"])
        report = {"score": 1, "references": receipts[:2]}
        assert http.post("/reef/report", headers={"x-reef-scenario": source_scenario}, json=report).status_code == 200
        export = tmp_path / "source.jsonl"
        export.write_bytes(http.get(f"/reef/scenarios/{source_scenario}/records/export").content)

        imported = run_import(export, reef.url, copy_scenario, "--batch-size", "2")

        assert imported.returncode == 0, imported.stderr + imported.stdout
        assert "4 records acknowledged" in imported.stdout
        source, copy = all_records(http, source_scenario), all_records(http, copy_scenario)
        assert [r["agent_record_id"] for r in copy] == [r["agent_record_id"] for r in source]
        assert {r["scenario"] for r in source} == {source_scenario} and {r["scenario"] for r in copy} == {copy_scenario}
        assert [r["payload"] for r in copy] == [r["payload"] for r in source]
        # Citations resolve within each scenario: the copied report cites the copied inferences.
        assert copy[0]["cited_by"] == [copy[3]["agent_record_id"]] and source[0]["cited_by"] == [
            source[3]["agent_record_id"]
        ]

        # A receipt that exists only in the source scenario is no receipt of the copy.
        only_there = http.post(
            "/v1/chat/completions",
            headers={"x-reef-scenario": source_scenario},
            json={"model": "fake-model", "messages": [{"role": "user", "content": "later"}]},
        ).headers["x-reef-agent-record-id"]
        refused = http.post(
            "/reef/report", headers={"x-reef-scenario": copy_scenario}, json={"references": [only_there], "score": 1}
        )
        assert refused.status_code == 400 and "references[0]" in refused.json()["error"]["message"]

        # Importing the file again is a retry; changing a record under a kept id is a conflict that says why.
        again = run_import(export, reef.url, copy_scenario, "--progress", str(tmp_path / "again.json"))
        assert again.returncode == 0, again.stderr + again.stdout
        changed = {"agent_record_id": receipts[2], "request_type": "inference", "payload": {"request": {"changed": 1}}}
        clash = http.post("/reef/records", headers={"x-reef-scenario": copy_scenario}, json=changed)
        assert clash.status_code == 409
        assert f"already exists in scenario '{copy_scenario}'" in clash.json()["error"]["message"]
        assert "payload differs" in clash.json()["error"]["message"]
        assert len(all_records(http, copy_scenario)) == 4
