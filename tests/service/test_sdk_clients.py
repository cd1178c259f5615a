"""The real OpenAI and Anthropic SDKs work against `reef serve` unchanged, and every answer carries a receipt."""

from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.service.conftest import stored_record

pytestmark = pytest.mark.e2e

SCENARIO = "sdk"


@pytest.fixture()
def openai_client(reef: ReefProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=reef.url + "/v1", api_key="unused", default_headers={"x-reef-scenario": SCENARIO})


@pytest.fixture()
def anthropic_client(reef: ReefProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=reef.url, api_key="unused", default_headers={"x-reef-scenario": SCENARIO})


def test_a_chat_completion_returns_the_upstream_answer_and_a_receipt_of_a_durable_record(
    openai_client: openai.OpenAI, http: httpx.Client
) -> None:
    raw = openai_client.chat.completions.with_raw_response.create(
        model="fake-model", messages=[{"role": "user", "content": "hello there"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello there"
    receipt = raw.headers["x-reef-agent-record-id"]
    record = stored_record(http, SCENARIO, receipt)
    assert record["request_type"] == "inference"
    assert record["payload"]["request"]["messages"][0]["content"] == "hello there"
    assert record["payload"]["response"]["choices"][0]["message"]["content"] == "echo: hello there"
    assert record["payload"]["complete"] is True
    assert raw.headers["x-reef-release-id"] == record["payload"]["release_id"]


def test_a_streamed_chat_completion_carries_its_receipt_in_band_before_done(
    openai_client: openai.OpenAI, http: httpx.Client
) -> None:
    stream = openai_client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "stream me"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: stream me"
    receipt_chunks = [c for c in chunks if (c.model_extra or {}).get("reef")]
    assert len(receipt_chunks) == 1 and receipt_chunks[0] is chunks[-1]
    assert receipt_chunks[0].choices == []
    receipt = receipt_chunks[0].model_extra["reef"]["agent_record_id"]
    record = stored_record(http, SCENARIO, receipt)
    assert record["payload"]["stream"] is True and record["payload"]["complete"] is True
    assert record["payload"]["response"]["choices"][0]["message"]["content"] == "echo: stream me"


def test_the_responses_api_works_through_the_sdk(openai_client: openai.OpenAI, http: httpx.Client) -> None:
    raw = openai_client.responses.with_raw_response.create(model="fake-model", input="respond please")
    assert raw.parse().output_text == "echo: respond please"
    stored_record(http, SCENARIO, raw.headers["x-reef-agent-record-id"])


def test_a_streamed_response_carries_its_receipt_on_the_completed_event(
    openai_client: openai.OpenAI, http: httpx.Client
) -> None:
    events = list(openai_client.responses.create(model="fake-model", input="stream a response", stream=True))
    completed = [e for e in events if e.type == "response.completed"]
    assert len(completed) == 1
    receipt = completed[0].model_extra["reef"]["agent_record_id"]
    assert stored_record(http, SCENARIO, receipt)["payload"]["complete"] is True


def test_anthropic_messages_work_through_the_sdk(anthropic_client: anthropic.Anthropic, http: httpx.Client) -> None:
    raw = anthropic_client.messages.with_raw_response.create(
        model="fake-model", max_tokens=32, messages=[{"role": "user", "content": "hi claude"}]
    )
    message = raw.parse()
    assert message.content[0].text == "echo: hi claude"
    record = stored_record(http, SCENARIO, raw.headers["x-reef-agent-record-id"])
    assert record["payload"]["dialect"] == "messages"


def test_streamed_anthropic_messages_carry_the_receipt_on_message_stop(
    anthropic_client: anthropic.Anthropic, http: httpx.Client
) -> None:
    events = list(
        anthropic_client.messages.create(
            model="fake-model", max_tokens=32, messages=[{"role": "user", "content": "stream claude"}], stream=True
        )
    )
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "echo: stream claude"
    stops = [e for e in events if e.type == "message_stop"]
    assert len(stops) == 1 and stops[0] is events[-1]
    receipt = stops[0].model_extra["reef"]["agent_record_id"]
    record = stored_record(http, SCENARIO, receipt)
    assert record["payload"]["response"]["content"][0]["text"] == "echo: stream claude"


def test_count_tokens_and_models_are_served(
    anthropic_client: anthropic.Anthropic, openai_client: openai.OpenAI
) -> None:
    counted = anthropic_client.messages.count_tokens(model="fake-model", messages=[{"role": "user", "content": "x"}])
    assert counted.input_tokens > 0
    assert any(m.id for m in openai_client.models.list())


def test_tags_are_stored_on_the_record(openai_client: openai.OpenAI, http: httpx.Client) -> None:
    raw = openai_client.chat.completions.with_raw_response.create(
        model="fake-model",
        messages=[{"role": "user", "content": "tagged"}],
        extra_headers={"x-reef-tag-team": "blue", "x-reef-tag-run": "7"},
    )
    record = stored_record(http, SCENARIO, raw.headers["x-reef-agent-record-id"])
    assert record["payload"]["tags"] == {"team": "blue", "run": "7"}


def test_an_upstream_4xx_is_relayed_with_its_status(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model="error-400", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 400


def test_an_upstream_5xx_becomes_a_502(openai_client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        openai_client.with_options(max_retries=0).chat.completions.create(
            model="error-500", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 502


def test_a_missing_scenario_header_is_a_400_naming_it(reef: ReefProcess) -> None:
    response = httpx.post(reef.url + "/v1/chat/completions", json={"model": "m", "messages": []})
    assert response.status_code == 400
    assert "x-reef-scenario" in response.json()["error"]["message"]


def test_a_malformed_scenario_name_is_refused(reef: ReefProcess) -> None:
    response = httpx.post(
        reef.url + "/v1/chat/completions", json={"model": "m", "messages": []}, headers={"x-reef-scenario": "a b/c"}
    )
    assert response.status_code == 400


def test_a_stream_cut_short_upstream_is_still_recorded_as_incomplete(reef: ReefProcess, http: httpx.Client) -> None:
    scenario = "cut-streams"
    body = {"model": "cut", "stream": True, "messages": [{"role": "user", "content": "this will break"}]}
    with httpx.stream(
        "POST", reef.url + "/v1/chat/completions", json=body, headers={"x-reef-scenario": scenario}, timeout=30
    ) as response:
        text = b"".join(response.iter_bytes())
    assert b"[DONE]" not in text and b'"reef"' not in text
    deadline = time.monotonic() + 10
    records: list = []
    while not records and time.monotonic() < deadline:
        listed = http.get(f"/reef/scenarios/{scenario}/records")
        records = listed.json()["records"] if listed.status_code == 200 else []
        time.sleep(0.2)
    assert len(records) == 1
    payload = stored_record(http, scenario, records[0]["agent_record_id"])["payload"]
    assert payload["complete"] is False and payload["stream"] is True
