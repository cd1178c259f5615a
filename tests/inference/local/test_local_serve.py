"""`reef serve --inference.model-path smollm2` end to end, through the OpenAI and Anthropic SDKs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.fakes.reef_process import ReefProcess

pytestmark = [pytest.mark.e2e, pytest.mark.model]

QUESTION = "What is the capital of France? Answer in one word."
HEADERS = {"x-reef-scenario": "geo"}


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    # model_dir first: the conversion happens once, in the fixture; the server finds it in the same cache.
    flags = ["--inference.model-path", "smollm2", "--inference.model-cache-dir", str(model_dir.parent)]
    with ReefProcess(tmp_path_factory.mktemp("serve"), *flags) as process:
        yield process


def test_the_openai_sdk_gets_paris_and_a_receipt_from_reef_serve(server):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="unused", default_headers=HEADERS)
    raw = client.chat.completions.with_raw_response.create(
        model="smollm2", messages=[{"role": "user", "content": QUESTION}], temperature=0, max_tokens=16
    )
    completion = raw.parse()
    assert "Paris" in completion.choices[0].message.content
    assert raw.headers["x-reef-agent-record-id"] and completion.usage.completion_tokens > 0
    pieces = [
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": QUESTION}],
            temperature=0,
            max_tokens=16,
            stream=True,
        )
        if chunk.choices
    ]
    assert "Paris" in "".join(pieces)
    assert [m.id for m in client.models.list().data] == ["smollm2"]


def test_the_anthropic_sdk_gets_paris_from_reef_serve(server):
    from anthropic import Anthropic

    client = Anthropic(base_url=server.url, api_key="unused", default_headers=HEADERS)
    message = client.messages.create(
        model="smollm2", max_tokens=16, messages=[{"role": "user", "content": QUESTION}], extra_body={"temperature": 0}
    )
    assert "Paris" in message.content[0].text


def test_a_json_schema_response_format_gets_an_answer_of_that_shape_and_a_bad_one_is_a_400(server):
    import httpx
    from openai import BadRequestError, OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key="unused", default_headers={"x-reef-scenario": "shape"})
    schema = {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer", "minimum": 0, "maximum": 9}}
    completion = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Two digits?"}],
        max_tokens=16,
        response_format={"type": "json_schema", "json_schema": {"name": "digits", "schema": schema, "strict": True}},
    )
    digits = json.loads(completion.choices[0].message.content or "")
    assert len(digits) == 2 and all(isinstance(d, int) and 0 <= d <= 9 for d in digits)
    records = httpx.get(server.url + "/reef/scenarios/shape/records", headers={"x-reef-scenario": "shape"}).json()
    with pytest.raises(BadRequestError) as refused:
        client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Two digits?"}],
            response_format={"type": "json_schema", "json_schema": {"name": "digits"}},  # type: ignore[typeddict-item]
        )
    assert "response_format.json_schema.schema" in str(refused.value)
    after = httpx.get(server.url + "/reef/scenarios/shape/records", headers={"x-reef-scenario": "shape"}).json()
    assert len(after["records"]) == len(records["records"]) == 1  # the refused request stored nothing
