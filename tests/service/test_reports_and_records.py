"""Reports are validated exactly as docs/reference/http-api.md says, each rule its own 400, nothing stored on
refusal."""

from __future__ import annotations

import httpx
import pytest

from tests.service.conftest import scenario_headers

pytestmark = pytest.mark.e2e

SCENARIO = "reports"
OTHER = "reports-other"


def _infer(http: httpx.Client, scenario: str) -> str:
    response = http.post(
        "/v1/chat/completions",
        headers=scenario_headers(scenario),
        json={"model": "fake-model", "messages": [{"role": "user", "content": "q"}]},
    )
    assert response.status_code == 200, response.text
    return response.headers["x-reef-agent-record-id"]


def _count(http: httpx.Client, scenario: str) -> int:
    response = http.get(f"/reef/scenarios/{scenario}/records", params={"limit": 1000})
    return len(response.json()["records"]) if response.status_code == 200 else 0


def _report(http: httpx.Client, body: object, scenario: str = SCENARIO) -> httpx.Response:
    return http.post("/reef/report", headers=scenario_headers(scenario), json=body)


def test_a_valid_report_citing_a_receipt_is_stored(http: httpx.Client) -> None:
    receipt = _infer(http, SCENARIO)
    response = _report(http, {"score": 0.5, "feedback": "ok", "references": [receipt], "metadata": {"k": 1}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["scenario"] == SCENARIO and body["request_type"] == "report"
    stored = http.get(f"/reef/scenarios/{SCENARIO}/records/{body['agent_record_id']}").json()
    assert stored["payload"] == {"score": 0.5, "feedback": "ok", "references": [receipt], "metadata": {"k": 1}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"score": True}, "score"),
        ({"score": "1"}, "score"),
        ({"feedback": 3}, "feedback"),
        ({"references": "rec_x"}, "references"),
        ({"metadata": [1]}, "metadata"),
        ({"agent_record_id": 7}, "agent_record_id"),
        ({"surprise": 1}, "surprise"),
        ({"references": ["rec_missing"]}, "references[0]"),
    ],
)
def test_each_report_rule_refuses_with_a_400_naming_the_field(http: httpx.Client, body: dict, field: str) -> None:
    before = _count(http, SCENARIO)
    response = _report(http, body)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]
    assert _count(http, SCENARIO) == before


def test_a_non_finite_score_is_refused(http: httpx.Client) -> None:
    response = http.post(
        "/reef/report",
        headers={**scenario_headers(SCENARIO), "content-type": "application/json"},
        content=b'{"score": NaN}',
    )
    assert response.status_code == 400


def test_duplicate_references_are_refused(http: httpx.Client) -> None:
    receipt = _infer(http, SCENARIO)
    response = _report(http, {"score": 1, "references": [receipt, receipt]})
    assert response.status_code == 400 and "references" in response.json()["error"]["message"]


def test_a_report_citing_another_scenarios_receipt_is_refused(http: httpx.Client) -> None:
    foreign = _infer(http, OTHER)
    before = _count(http, SCENARIO)
    response = _report(http, {"score": 1, "references": [foreign]})
    assert response.status_code == 400 and "references[0]" in response.json()["error"]["message"]
    assert _count(http, SCENARIO) == before


def test_a_report_citing_a_report_is_refused(http: httpx.Client) -> None:
    report_id = _report(http, {"score": 1}).json()["agent_record_id"]
    response = _report(http, {"score": 1, "references": [report_id]})
    assert response.status_code == 400 and "not an inference" in response.json()["error"]["message"]


def test_a_retried_report_gets_the_same_receipt_and_a_changed_one_a_409(http: httpx.Client) -> None:
    body = {"score": 0.25, "agent_record_id": "report-retry-1"}
    first = _report(http, body)
    again = _report(http, body)
    assert first.status_code == again.status_code == 200
    assert first.json()["agent_record_id"] == again.json()["agent_record_id"] == "report-retry-1"
    changed = _report(http, {**body, "score": 0.75})
    assert changed.status_code == 409


def test_records_are_paged_in_sequence_order(http: httpx.Client) -> None:
    scenario = "paging"
    receipts = [_infer(http, scenario) for _ in range(5)]
    first = http.get(f"/reef/scenarios/{scenario}/records", params={"limit": 2}).json()
    assert [r["agent_record_id"] for r in first["records"]] == receipts[:2]
    rest = http.get(
        f"/reef/scenarios/{scenario}/records", params={"after_sequence": first["next_after_sequence"], "limit": 10}
    ).json()
    assert [r["agent_record_id"] for r in rest["records"]] == receipts[2:]
    sequences = [r["sequence"] for r in first["records"] + rest["records"]]
    assert sequences == sorted(sequences)


def test_an_unknown_record_or_scenario_is_a_404(http: httpx.Client) -> None:
    _infer(http, SCENARIO)
    assert http.get(f"/reef/scenarios/{SCENARIO}/records/rec_nope").status_code == 404
    assert http.get("/reef/scenarios/never-seen/records").status_code == 404


def test_records_are_imported_one_at_a_time_or_atomically_in_a_batch(http: httpx.Client) -> None:
    scenario = "imports"
    one = http.post(
        "/reef/records",
        headers=scenario_headers(scenario),
        json={"agent_record_id": "imp-1", "request_type": "inference", "payload": {"request": {}, "response": {}}},
    )
    assert one.status_code == 200, one.text
    good = {"agent_record_id": "imp-2", "request_type": "report", "payload": {"score": 1}}
    clash = {"agent_record_id": "imp-1", "request_type": "inference", "payload": {"different": True}}
    refused = http.post("/reef/records/batch", headers=scenario_headers(scenario), json={"records": [good, clash]})
    assert refused.status_code == 409
    assert http.get(f"/reef/scenarios/{scenario}/records/imp-2").status_code == 404
    accepted = http.post("/reef/records/batch", headers=scenario_headers(scenario), json={"records": [good]})
    assert accepted.status_code == 200
    assert http.post("/reef/records/batch", headers=scenario_headers(scenario), json={"records": []}).status_code == 400


def test_scenarios_are_created_listed_and_archived(http: httpx.Client) -> None:
    created = http.post("/reef/scenarios", json={"name": "made-explicitly"})
    assert created.status_code == 201
    assert http.post("/reef/scenarios", json={"name": "made-explicitly"}).status_code == 200
    names = [s["name"] for s in http.get("/reef/scenarios").json()["scenarios"]]
    assert "made-explicitly" in names
    releases = http.get("/reef/scenarios/made-explicitly/releases").json()["releases"]
    assert len(releases) == 1 and releases[0]["operation"] == "creation" and releases[0]["current"]
    assert http.delete("/reef/scenarios/made-explicitly").status_code == 200
    assert "made-explicitly" not in [s["name"] for s in http.get("/reef/scenarios").json()["scenarios"]]
    assert http.post("/reef/scenarios", json={"name": "bad name"}).status_code == 400


def test_a_body_over_the_limit_is_a_413(http: httpx.Client) -> None:
    response = http.post("/v1/chat/completions", headers=scenario_headers(SCENARIO), content=b"x" * (17 * 1024 * 1024))
    assert response.status_code == 413


def test_malformed_json_is_a_400(http: httpx.Client) -> None:
    response = http.post("/v1/chat/completions", headers=scenario_headers(SCENARIO), content=b"{not json")
    assert response.status_code == 400 and "body" in response.json()["error"]["message"]


def test_health_status_and_metrics_are_served(http: httpx.Client) -> None:
    _infer(http, SCENARIO)
    assert http.get("/healthz").json() == {"ok": True}
    assert SCENARIO in http.get("/reef/status").json()["scenarios"]
    metrics = http.get("/metrics").text
    assert "reef_requests_total" in metrics and "reef_records_appended_total" in metrics
    assert "reef_request_latency_seconds_bucket" in metrics
