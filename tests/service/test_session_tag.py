"""The `x-reef-tag-session` header (sessions of the openclawrl recipe): stored as a tag, refused over 128 chars."""

from __future__ import annotations

import httpx
import pytest

from tests.service.conftest import scenario_headers, stored_record

pytestmark = pytest.mark.e2e

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def test_a_session_tag_is_stored_on_the_record(http: httpx.Client) -> None:
    headers = {**scenario_headers("sessions-ok"), "x-reef-tag-session": "s" * 128}
    response = http.post("/v1/chat/completions", json=BODY, headers=headers)
    assert response.status_code == 200, response.text
    record = stored_record(http, "sessions-ok", response.headers["x-reef-agent-record-id"])
    assert record["payload"]["tags"]["session"] == "s" * 128


def test_a_session_tag_over_128_characters_is_a_400_naming_the_header_and_stores_nothing(http: httpx.Client) -> None:
    headers = {**scenario_headers("sessions-long"), "x-reef-tag-session": "s" * 129}
    for path in ("/v1/chat/completions", "/v1/messages"):
        response = http.post(path, json={**BODY, "max_tokens": 8}, headers=headers)
        assert response.status_code == 400, response.text
        assert "x-reef-tag-session" in response.json()["error"]["message"]
    assert http.get("/reef/scenarios/sessions-long/records").status_code == 404  # not even the scenario


def test_an_imported_inference_with_a_session_tag_over_128_characters_is_refused_naming_the_field(
    http: httpx.Client,
) -> None:
    payload = {"request": {"messages": [{"role": "user", "content": "hi"}]}, "tags": {"session": "s" * 129}}
    headers = scenario_headers("sessions-import")
    one = http.post("/reef/records", json={"request_type": "inference", "payload": payload}, headers=headers)
    assert one.status_code == 400 and "payload.tags.session" in one.json()["error"]["message"]
    ok = {"request_type": "inference", "payload": {**payload, "tags": {"session": "s"}}}
    batch = http.post(
        "/reef/records/batch",
        json={"records": [ok, {"request_type": "inference", "payload": payload}]},
        headers=headers,
    )
    assert batch.status_code == 400 and "records[1].payload.tags.session" in batch.json()["error"]["message"]
    assert http.get("/reef/scenarios/sessions-import/records").status_code == 404  # nothing stored, no scenario
