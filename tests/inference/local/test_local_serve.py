"""`reef serve --inference.model-path smollm2` end to end, through the OpenAI and Anthropic SDKs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.reef_process import ReefProcess

pytestmark = pytest.mark.model

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
