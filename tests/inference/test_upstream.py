"""The upstream proxy engine against the fake provider: passthrough, translation, streaming and errors."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from reef.core.errors import BadRequest, UpstreamError, UpstreamRejected, UpstreamTimeout
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext, StreamFrame
from reef.inference.sse import SSESplitter, parse_event
from reef.inference.translate import convert_response
from reef.inference.upstream import UpstreamEngine, base_url
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

API_OF = {Dialect.CHAT: "openai", Dialect.RESPONSES: "responses", Dialect.MESSAGES: "anthropic"}
PATHS = {Dialect.CHAT: "/v1/chat/completions", Dialect.MESSAGES: "/v1/messages", Dialect.RESPONSES: "/v1/responses"}
PAIRS = [(c, u) for c in Dialect for u in Dialect]
PAIR_IDS = [f"{c.value}-via-{u.value}" for c, u in PAIRS]
KEY = "sk-very-secret-key"
CTX = RequestContext("demo")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with start_fake_upstream() as server:
        yield server


async def _engine(url: str, upstream: Dialect, **settings: Any) -> UpstreamEngine:
    engine = UpstreamEngine(
        InferenceSettings(upstream_url=url, upstream_api=API_OF[upstream], upstream_api_key=KEY, **settings)
    )
    await engine.start()
    return engine


@pytest.fixture
async def engines(fake: FakeUpstream) -> AsyncIterator[dict[Dialect, UpstreamEngine]]:
    made = {d: await _engine(fake.url + "/v1", d, upstream_model="fake-model") for d in Dialect}
    yield made
    for engine in made.values():
        await engine.aclose()


def _body(dialect: Dialect, text: str = "hello there", model: str | None = "m", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model} if model is not None else {}
    if dialect is Dialect.RESPONSES:
        body["input"] = text
    else:
        body["messages"] = [{"role": "user", "content": text}]
    if dialect is Dialect.MESSAGES:
        body["max_tokens"] = 16
    return {**body, **extra}


def _text(dialect: Dialect, body: dict[str, Any]) -> str:
    return convert_response(body, dialect, Dialect.CHAT)["choices"][0]["message"]["content"]


def _direct(fake: FakeUpstream, path: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(fake.url + path, data=orjson.dumps(body), method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.read()
    except urllib.error.HTTPError as error:
        return error.read()


async def _drain(stream: Any) -> list[StreamFrame]:
    return [frame async for frame in stream.frames()]


def test_the_upstream_url_loses_a_trailing_v1_or_slash() -> None:
    assert base_url("http://h:8000/v1/") == "http://h:8000"
    assert base_url("http://h:8000/v1") == "http://h:8000"
    assert base_url("http://h:8000/") == "http://h:8000"


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_a_same_dialect_answer_is_relayed_byte_exact(fake: FakeUpstream, engines: dict, dialect: Dialect) -> None:
    completion = await engines[dialect].complete(dialect, _body(dialect), CTX)
    assert completion.status == 200
    assert completion.raw == _direct(fake, PATHS[dialect], _body(dialect))
    assert completion.body == orjson.loads(completion.raw)
    assert completion.usage == completion.body["usage"]


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_a_same_dialect_stream_is_relayed_byte_exact(fake: FakeUpstream, engines: dict, dialect: Dialect) -> None:
    body = _body(dialect, stream=True)
    stream = await engines[dialect].stream(dialect, body, CTX)
    frames = await _drain(stream)
    assert b"".join(f.data for f in frames) == _direct(fake, PATHS[dialect], body)
    assert [f.terminal for f in frames] == [False] * (len(frames) - 1) + [True]
    assert stream.result().complete
    assert _text(dialect, stream.result().body) == "echo: hello there"


@pytest.mark.parametrize(("client", "upstream"), PAIRS, ids=PAIR_IDS)
async def test_every_dialect_pair_answers_in_the_clients_dialect(
    engines: dict, client: Dialect, upstream: Dialect
) -> None:
    completion = await engines[upstream].complete(client, _body(client), CTX)
    assert completion.status == 200
    assert _text(client, completion.body) == "echo: hello there"
    assert completion.usage is not None


@pytest.mark.parametrize(("client", "upstream"), PAIRS, ids=PAIR_IDS)
async def test_every_dialect_pair_streams_in_the_clients_dialect(
    engines: dict, client: Dialect, upstream: Dialect
) -> None:
    stream = await engines[upstream].stream(client, _body(client, stream=True), CTX)
    frames = await _drain(stream)
    assert frames[-1].terminal and not any(f.terminal for f in frames[:-1])
    splitter = SSESplitter()
    events = [parse_event(raw) for f in frames for raw in splitter.feed(f.data)]
    assert len(events) == len(frames), "each frame is exactly one whole event"
    result = stream.result()
    assert result.complete and result.error is None
    assert _text(client, result.body) == "echo: hello there"
    assert result.usage
    if client is Dialect.CHAT:
        assert stream.last_chunk is not None and stream.last_chunk["object"] == "chat.completion.chunk"


@pytest.mark.parametrize(("client", "upstream"), PAIRS, ids=PAIR_IDS)
async def test_tool_calls_cross_dialects(engines: dict, client: Dialect, upstream: Dialect) -> None:
    tools = {
        Dialect.CHAT: [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        Dialect.MESSAGES: [{"name": "lookup", "input_schema": {"type": "object"}}],
        Dialect.RESPONSES: [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
    }[client]
    for stream in (False, True):
        body = _body(client, model="tool-model", tools=tools, stream=stream)
        if stream:
            relay = await engines[upstream].stream(client, body, CTX)
            await _drain(relay)
            answer = relay.result().body
        else:
            answer = (await engines[upstream].complete(client, body, CTX)).body
        choice = convert_response(answer, client, Dialect.CHAT)["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        call = choice["message"]["tool_calls"][0]["function"]
        assert call["name"] == "lookup"
        assert orjson.loads(call["arguments"]) == {"text": "hello there"}


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_a_missing_model_is_filled_and_a_given_one_kept(
    fake: FakeUpstream, engines: dict, dialect: Dialect
) -> None:
    completion = await engines[dialect].complete(dialect, _body(dialect, model=None), CTX)
    assert fake.received[-1].json()["model"] == "fake-model"
    assert completion.request["model"] == "fake-model"
    await engines[dialect].complete(dialect, _body(dialect, model=""), CTX)
    assert fake.received[-1].json()["model"] == "fake-model"
    await engines[dialect].complete(dialect, _body(dialect, model="mine"), CTX)
    assert fake.received[-1].json()["model"] == "mine"


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_the_upstream_key_is_sent_in_the_providers_header_and_never_recorded(
    fake: FakeUpstream, engines: dict, dialect: Dialect
) -> None:
    completion = await engines[dialect].complete(dialect, _body(dialect), CTX)
    headers = fake.received[-1].headers
    if dialect is Dialect.MESSAGES:
        assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in headers
    else:
        assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers
    stream = await engines[dialect].stream(dialect, _body(dialect, stream=True), CTX)
    await _drain(stream)
    for recorded in (completion.request, stream.request, completion.body, stream.result().body):
        assert KEY.encode() not in orjson.dumps(recorded)


@pytest.mark.parametrize(("client", "upstream"), [(Dialect.CHAT, Dialect.CHAT), (Dialect.MESSAGES, Dialect.CHAT)])
async def test_an_upstream_400_is_relayed_with_its_status(
    fake: FakeUpstream, engines: dict, client: Dialect, upstream: Dialect
) -> None:
    completion = await engines[upstream].complete(client, _body(client, model="error-400"), CTX)
    assert completion.status == 400
    if client is upstream:
        assert completion.raw == _direct(fake, PATHS[upstream], _body(upstream, model="error-400"))
    else:
        assert completion.body["type"] == "error" and completion.body["error"]["message"] == "fake upstream 400"
    with pytest.raises(UpstreamRejected) as caught:
        await engines[upstream].stream(client, _body(client, model="error-400", stream=True), CTX)
    assert caught.value.status == 400 and caught.value.message == "fake upstream 400"


@pytest.mark.parametrize("stream", [False, True])
async def test_an_upstream_500_is_an_upstream_error(engines: dict, stream: bool) -> None:
    body = _body(Dialect.CHAT, model="error-500", stream=stream)
    with pytest.raises(UpstreamError):
        if stream:
            await engines[Dialect.CHAT].stream(Dialect.CHAT, body, CTX)
        else:
            await engines[Dialect.CHAT].complete(Dialect.CHAT, body, CTX)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unreachable_upstream_is_an_upstream_error(stream: bool) -> None:
    engine = await _engine(f"http://127.0.0.1:{_closed_port()}", Dialect.CHAT, upstream_model="x")
    try:
        assert engine.models() == [{"id": "x", "object": "model", "created": 0, "owned_by": "upstream"}]
        with pytest.raises(UpstreamError):
            if stream:
                await engine.stream(Dialect.CHAT, _body(Dialect.CHAT, stream=True), CTX)
            else:
                await engine.complete(Dialect.CHAT, _body(Dialect.CHAT), CTX)
    finally:
        await engine.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_slow_upstream_times_out(fake: FakeUpstream, stream: bool) -> None:
    engine = await _engine(fake.url, Dialect.MESSAGES, timeout_s=0.2)
    try:
        with pytest.raises(UpstreamTimeout):
            body = _body(Dialect.MESSAGES, model="slow-3", stream=stream)
            if stream:
                await engine.stream(Dialect.MESSAGES, body, CTX)
            else:
                await engine.complete(Dialect.MESSAGES, body, CTX)
    finally:
        await engine.aclose()


@pytest.mark.parametrize(("client", "upstream"), PAIRS, ids=PAIR_IDS)
async def test_a_stream_cut_by_the_upstream_is_incomplete(engines: dict, client: Dialect, upstream: Dialect) -> None:
    stream = await engines[upstream].stream(client, _body(client, "a b c d e f g h", model="cut", stream=True), CTX)
    frames = await _drain(stream)
    assert frames and not any(f.terminal for f in frames)
    result = stream.result()
    assert not result.complete and result.error
    assert _text(client, result.body).startswith("echo:")


async def test_a_stream_closed_by_the_client_is_incomplete(engines: dict) -> None:
    stream = await engines[Dialect.CHAT].stream(Dialect.MESSAGES, _body(Dialect.MESSAGES, stream=True), CTX)
    iterator = stream.frames()
    await iterator.__anext__()
    await stream.aclose()
    await iterator.aclose()
    assert not stream.result().complete
    # The pool still serves after a dropped stream.
    assert (await engines[Dialect.CHAT].complete(Dialect.CHAT, _body(Dialect.CHAT), CTX)).status == 200


async def test_a_harness_system_prompt_reaches_the_upstream(fake: FakeUpstream, engines: dict) -> None:
    ctx = RequestContext("demo", system_prompt="Follow the rules.")
    completion = await engines[Dialect.MESSAGES].complete(Dialect.CHAT, _body(Dialect.CHAT), ctx)
    assert fake.received[-1].json()["system"] == "Follow the rules."
    assert completion.request["messages"][0] == {"role": "system", "content": "Follow the rules."}


async def test_a_malformed_body_is_refused_before_a_harness_prompt_is_merged_into_it(
    fake: FakeUpstream, engines: dict
) -> None:
    ctx = RequestContext("demo", system_prompt="Follow the rules.")
    sent = len(fake.received)
    with pytest.raises(BadRequest) as caught:
        await engines[Dialect.CHAT].complete(Dialect.CHAT, {"model": "m", "messages": [5]}, ctx)
    assert caught.value.field == "messages.0" and len(fake.received) == sent


async def test_a_malformed_body_is_passed_through_unread_to_a_same_dialect_upstream(engines: dict) -> None:
    completion = await engines[Dialect.CHAT].complete(Dialect.CHAT, {"model": "m", "messages": [5]}, CTX)
    assert completion.status == 400 and completion.body["error"]["message"] == "messages.0: must be an object"


async def test_models_come_from_the_upstream(engines: dict) -> None:
    assert engines[Dialect.CHAT].models()[0]["id"] == "fake-model"


async def test_count_tokens_asks_an_anthropic_upstream_and_estimates_elsewhere(
    fake: FakeUpstream, engines: dict
) -> None:
    body = _body(Dialect.MESSAGES)
    counted = await engines[Dialect.MESSAGES].count_tokens(body, CTX)
    assert fake.received[-1].path == "/v1/messages/count_tokens" and counted["input_tokens"] > 0
    assert (await engines[Dialect.CHAT].count_tokens(body, CTX))["input_tokens"] > 0
    with pytest.raises(BadRequest) as caught:
        await engines[Dialect.CHAT].count_tokens({"messages": 5}, CTX)
    assert caught.value.field == "messages"


async def test_the_activated_release_is_reported_on_answers(engines: dict) -> None:
    engine = engines[Dialect.CHAT]
    release = Release("rel_1", "demo", None, "c1", "creation", 0, "basic", {}, 0.0)
    await engine.activate("demo", release, None)
    assert engine.active_release_id("demo") == "rel_1"
    assert (await engine.complete(Dialect.CHAT, _body(Dialect.CHAT), CTX)).release_id == "rel_1"
    pinned = RequestContext("demo", release_id="rel_0")
    assert (await engine.complete(Dialect.CHAT, _body(Dialect.CHAT), pinned)).release_id == "rel_0"
    await engine.activate("demo", None, None)
    assert engine.active_release_id("demo") is None
