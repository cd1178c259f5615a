"""The audit routes over a real runtime (SQLite records, git releases, commit log, the fake dict engine and training
backend): record rows and their filters, the cursor's end, who cites an inference, which step consumed a record,
the JSONL export and the import receipts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from reef.service.app import create_app
from tests.fakes.learning_world import QUESTIONS, World, make_world

S = "math"
HEADERS = {"x-reef-scenario": S}
Q = list(QUESTIONS)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    world = make_world(tmp_path)
    await world.runtime.start()
    await world.runtime.ensure_scenario(S)
    yield world
    await world.runtime.stop()
    world.records.close()


@pytest.fixture
async def http(world: World) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(world.settings, world.runtime, world.engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://reef.test") as client:
        yield client


async def infer(http: httpx.AsyncClient, question: str = Q[0]) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": question}]}
    response = await http.post("/v1/chat/completions", json=body, headers=HEADERS)
    assert response.status_code == 200, response.text
    return response


async def receipt(http: httpx.AsyncClient, question: str = Q[0]) -> str:
    return (await infer(http, question)).headers["x-reef-agent-record-id"]


async def report(http: httpx.AsyncClient, *references: str, question: str = Q[0], score: float | None = None) -> str:
    body: dict[str, Any] = {"feedback": {"prompt": question, "answer": QUESTIONS[question]}, "references": references}
    if score is not None:
        body["score"] = score
    response = await http.post("/reef/report", json=body, headers=HEADERS)
    assert response.status_code == 200, response.text
    return response.json()["agent_record_id"]


async def rows(http: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await http.get(f"/reef/scenarios/{S}/records", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def ids(page: dict[str, Any]) -> list[str]:
    return [row["agent_record_id"] for row in page["records"]]


async def test_record_rows_carry_their_type_references_score_release_and_time(http, world) -> None:
    served = await infer(http)
    first, second = served.headers["x-reef-agent-record-id"], await receipt(http, Q[1])
    cited = await report(http, first, second, score=0.5)
    unscored = await report(http)

    inference, _, report_row, plain = (await rows(http))["records"]
    assert inference["agent_record_id"] == first and inference["request_type"] == "inference"
    assert inference["references"] == [] and inference["score"] is None
    assert inference["release_id"] == served.headers["x-reef-release-id"] == world.releases(S)[0]["release_id"]
    assert isinstance(inference["created_at"], float) and inference["evicted"] is False
    assert report_row["agent_record_id"] == cited and report_row["request_type"] == "report"
    assert report_row["references"] == [first, second] and report_row["score"] == 0.5
    assert report_row["release_id"] is None
    assert plain["agent_record_id"] == unscored and plain["score"] is None and plain["references"] == []
    assert inference["created_at"] <= report_row["created_at"]


async def test_an_evicted_body_leaves_its_row_with_unknown_references_score_and_release(http, world) -> None:
    first = await receipt(http)
    await report(http, first, score=1.0)
    world.records.enforce_retention(max_body_bytes=0)
    inference, evicted_report = (await rows(http))["records"]
    assert inference["evicted"] and inference["release_id"] is None
    assert evicted_report["evicted"] and evicted_report["references"] is None and evicted_report["score"] is None


async def test_the_cursor_is_null_exactly_when_no_record_follows(http) -> None:
    assert await rows(http) == {"records": [], "next_after_sequence": None}
    made = [await receipt(http) for _ in range(3)]

    whole = await rows(http, limit=3)
    assert ids(whole) == made and whole["next_after_sequence"] is None
    first = await rows(http, limit=2)
    assert ids(first) == made[:2] and first["next_after_sequence"] == first["records"][-1]["sequence"]
    rest = await rows(http, limit=2, after_sequence=first["next_after_sequence"])
    assert ids(rest) == made[2:] and rest["next_after_sequence"] is None

    walked, cursor = [], 0
    while cursor is not None:  # what a client does: loop until null
        page = await rows(http, limit=1, after_sequence=cursor)
        walked += ids(page)
        cursor = page["next_after_sequence"]
    assert walked == made


async def test_rows_filter_by_request_type_and_by_the_release_that_served_them(http, world) -> None:
    base = world.releases(S)[0]["release_id"]
    before = [await receipt(http, q) for q in Q[:2]]
    reports = [await report(http, r, question=q) for r, q in zip(before, Q[:2], strict=True)]
    commit = await world.runtime.step(S)
    assert commit is not None and commit["verdict"] == "published"
    trained = commit["release_id"]
    after = await receipt(http, Q[0])

    assert ids(await rows(http, request_type="inference")) == [*before, after]
    assert ids(await rows(http, request_type="report")) == reports
    assert ids(await rows(http, release_id=base)) == before
    assert ids(await rows(http, release_id=trained)) == [after]
    assert ids(await rows(http, release_id=trained, request_type="report")) == []
    filtered = await rows(http, request_type="inference", limit=2)
    assert ids(filtered) == before and filtered["next_after_sequence"] is not None
    last = await rows(http, request_type="inference", after_sequence=filtered["next_after_sequence"])
    assert ids(last) == [after] and last["next_after_sequence"] is None
    # The filter decides the end: no inference of `base` follows the last one, whatever else does.
    assert (await rows(http, release_id=base, limit=2))["next_after_sequence"] is None


@pytest.mark.parametrize(
    ("route", "params", "field"),
    [
        ("records", {"request_type": "feedback"}, "request_type"),
        ("records", {"release_id": "has space"}, "release_id"),
        ("records", {"release_id": ""}, "release_id"),
        ("records", {"limit": 0}, "limit"),
        ("commits", {"record_id": "x" * 201}, "record_id"),
        ("commits", {"after_step": -2}, "after_step"),
        ("records", {"after_sequence": 2**64}, "after_sequence"),  # past the store's 64-bit integers
        ("commits", {"after_step": 2**64}, "after_step"),
    ],
)
async def test_a_bad_query_value_is_a_400_naming_the_field(http, route: str, params: dict, field: str) -> None:
    response = await http.get(f"/reef/scenarios/{S}/{route}", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith(f"{field}:")


async def test_an_inference_names_the_reports_that_cite_it(http, world) -> None:
    first, second, lonely = await receipt(http), await receipt(http), await receipt(http)
    both = await report(http, first, second)
    again = await report(http, first)

    cited = (await http.get(f"/reef/scenarios/{S}/records/{first}")).json()
    assert cited["cited_by"] == [both, again] and cited["payload"]["request"]["messages"]
    assert (await http.get(f"/reef/scenarios/{S}/records/{second}")).json()["cited_by"] == [both]
    assert (await http.get(f"/reef/scenarios/{S}/records/{lonely}")).json()["cited_by"] == []
    report_record = (await http.get(f"/reef/scenarios/{S}/records/{both}")).json()
    assert "cited_by" not in report_record and report_record["references"] == [first, second]


async def test_commits_find_the_step_that_consumed_a_record(http, world) -> None:
    for q in Q[:2]:
        await report(http, await receipt(http, q), question=q)
    first = await world.runtime.step(S)
    for q in Q[2:4]:
        await report(http, question=q)
    second = await world.runtime.step(S)
    assert first is not None and second is not None and first["step"] < second["step"]
    unconsumed = await receipt(http)

    for commit in (first, second):
        for record_id in commit["consumed_record_ids"]:
            found = (await http.get(f"/reef/scenarios/{S}/commits", params={"record_id": record_id})).json()
            assert [c["step"] for c in found["commits"]] == [commit["step"]]
            row = (await http.get(f"/reef/scenarios/{S}/records/{record_id}")).json()
            assert row["consumed_step"] == commit["step"]
    assert first["consumed_record_ids"]
    nothing = await http.get(f"/reef/scenarios/{S}/commits", params={"record_id": unconsumed})
    assert nothing.json() == {"commits": []}
    later = {"record_id": first["consumed_record_ids"][0], "after_step": first["step"]}
    assert (await http.get(f"/reef/scenarios/{S}/commits", params=later)).json() == {"commits": []}
    all_steps = (await http.get(f"/reef/scenarios/{S}/commits")).json()["commits"]
    assert [c["step"] for c in all_steps] == [first["step"], second["step"]]
    assert (await http.get("/reef/scenarios/nobody/commits", params={"record_id": unconsumed})).status_code == 404


def envelopes(response: httpx.Response) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in response.content.splitlines()]


async def test_the_export_streams_every_record_as_a_jsonl_envelope_in_sequence_order(http, world) -> None:
    first = await receipt(http)
    await report(http, first, score=1.0)
    # A record named like the route is still exported, and the export is not taken for it.
    imported = {"agent_record_id": "export", "request_type": "inference", "payload": {"request": {}, "n": "ünï"}}
    assert (await http.post("/reef/records", json=imported, headers=HEADERS)).status_code == 200

    response = await http.get(f"/reef/scenarios/{S}/records/export")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = envelopes(response)
    stored = world.records.page(S, 0, 100)
    assert lines == [
        {"agent_record_id": r.agent_record_id, "request_type": r.request_type, "payload": r.payload} for r in stored
    ]
    assert [set(line) for line in lines] == [{"agent_record_id", "request_type", "payload"}] * 3
    assert response.headers["x-reef-export-records"] == "3" and response.headers["x-reef-export-evicted"] == "0"
    assert response.headers["x-reef-export-last-sequence"] == str(stored[-1].sequence)


async def test_the_export_pages_through_the_store_and_leaves_evicted_bodies_out(http, world, monkeypatch) -> None:
    import reef.application.recording as recording

    pages: list[int] = []
    page = world.records.page

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = page(*args, **kwargs)
        if "max_body_bytes" in kwargs:  # the export's reads (the learner reads pages of its own)
            pages.append(len(found))
        return found

    monkeypatch.setattr(recording, "EXPORT_PAGE_RECORDS", 2)
    monkeypatch.setattr(world.records, "page", counted)
    made = [await receipt(http, q) for q in Q]
    world.records.enforce_retention(max_body_bytes=sum(r.body_bytes for r in page(S, 0, 100)[2:]))

    response = await http.get(f"/reef/scenarios/{S}/records/export")
    assert [line["agent_record_id"] for line in envelopes(response)] == made[2:]
    assert response.headers["x-reef-export-records"] == "2" and response.headers["x-reef-export-evicted"] == "2"
    assert pages == [2, 2]  # two pages of two, and no read past the last sequence


async def test_the_export_of_an_unknown_scenario_is_a_404_naming_it(http) -> None:
    response = await http.get("/reef/scenarios/nowhere/records/export")
    assert response.status_code == 404 and "nowhere" in response.json()["error"]["message"]


async def test_import_receipts_name_the_record_its_type_and_scenario_and_nothing_else(http) -> None:
    one = {"agent_record_id": "imp-1", "request_type": "inference", "payload": {"request": {}}}
    single = await http.post("/reef/records", json=one, headers=HEADERS)
    assert single.json() == {"agent_record_id": "imp-1", "request_type": "inference", "scenario": S}
    batch = [
        {"agent_record_id": "imp-2", "request_type": "inference", "payload": {"request": {}}},
        {"agent_record_id": "imp-3", "request_type": "report", "payload": {"references": ["imp-2"], "score": 1}},
    ]
    imported = await http.post("/reef/records/batch", json={"records": batch}, headers=HEADERS)
    assert imported.json()["records"] == [
        {"agent_record_id": "imp-2", "request_type": "inference", "scenario": S},
        {"agent_record_id": "imp-3", "request_type": "report", "scenario": S},
    ]
    assert (await http.get(f"/reef/scenarios/{S}/records/imp-2")).json()["cited_by"] == ["imp-3"]


async def test_the_same_ids_imported_into_two_scenarios_are_two_records_and_references_stay_in_their_scenario(
    http,
) -> None:
    batch = [
        {"agent_record_id": "twin-1", "request_type": "inference", "payload": {"request": {"n": 1}}},
        {"agent_record_id": "twin-2", "request_type": "report", "payload": {"references": ["twin-1"], "score": 1}},
    ]
    for scenario in ("twin-a", "twin-b"):
        imported = await http.post(
            "/reef/records/batch", json={"records": batch}, headers={"x-reef-scenario": scenario}
        )
        assert imported.status_code == 200, imported.text
        assert [r["scenario"] for r in imported.json()["records"]] == [scenario, scenario]
    for scenario in ("twin-a", "twin-b"):
        record = (await http.get(f"/reef/scenarios/{scenario}/records/twin-1")).json()
        assert (record["scenario"], record["sequence"], record["cited_by"]) == (scenario, 1, ["twin-2"])
    only_a = {"agent_record_id": "alone", "request_type": "inference", "payload": {"request": {}}}
    assert (await http.post("/reef/records", json=only_a, headers={"x-reef-scenario": "twin-a"})).status_code == 200
    refused = await http.post(
        "/reef/report", json={"score": 1, "references": ["alone"]}, headers={"x-reef-scenario": "twin-b"}
    )
    assert refused.status_code == 400
    assert "references[0]" in refused.json()["error"]["message"] and "twin-b" in refused.json()["error"]["message"]
