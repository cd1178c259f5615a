"""`StreamRelay` over plain ASGI: frames that arrive together share a write, the receipt ends the body, and a
client that leaves mid-stream stops the relay with what it got recorded as cut short."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from reef.core.records import Record
from reef.core.scenarios import Dialect
from reef.inference.base import CompletionStream, StreamFrame, StreamResult
from reef.service.metrics import ServiceMetrics
from reef.service.routes import inference


class ScriptedStream(CompletionStream):
    """Yields `script` (frames, or a float to sleep that long) and remembers whether it was closed."""

    def __init__(self, script: list[StreamFrame | float]) -> None:
        self.request = {"messages": []}
        self.script = script
        self.yielded = 0
        self.finished = False
        self.closed = False

    async def frames(self) -> AsyncIterator[StreamFrame]:
        for step in self.script:
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            self.yielded += 1
            self.finished = step.terminal
            yield step

    def result(self) -> StreamResult:
        return StreamResult(body={"choices": []}, complete=self.finished, usage=None)

    async def aclose(self) -> None:
        self.closed = True


class Store:
    """The records part of the runtime the relay hands its inference record to."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    async def remember_inference(self, record: Record) -> None:
        self.records.append(record)


def _state(store: Store) -> Any:
    return SimpleNamespace(runtime=SimpleNamespace(recording=store), metrics=ServiceMetrics())


def _chunk(text: str) -> bytes:
    return b'data: {"id":"c1","created":1,"model":"m","choices":[{"delta":{"content":"' + text.encode() + b'"}}]}\n\n'


async def _relay(script: list[StreamFrame | float], disconnect_after_s: float | None) -> tuple[list[dict], Store, Any]:
    store = Store()
    stream = ScriptedStream(script)
    relay = inference._streaming_response(_state(store), Dialect.CHAT, "s", stream, {}, 0.0)
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(disconnect_after_s if disconnect_after_s is not None else 3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await relay({"type": "http"}, receive, send)
    await asyncio.sleep(0.05)  # a cut stream is recorded in the background
    return sent, store, stream


async def test_frames_at_hand_share_one_write_and_the_receipt_ends_the_body() -> None:
    done = StreamFrame(b"data: [DONE]\n\n", terminal=True)
    script: list[StreamFrame | float] = [
        StreamFrame(_chunk("a"), more=True),
        StreamFrame(_chunk("b")),
        0.01,
        StreamFrame(_chunk("c"), more=True),
        done,
    ]
    sent, store, stream = await _relay(script, None)
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert [m["more_body"] for m in bodies] == [True, False]
    assert bodies[0]["body"] == _chunk("a") + _chunk("b")
    last = bodies[1]["body"]
    assert last.startswith(_chunk("c")) and last.endswith(b"data: [DONE]\n\n")
    record = store.records[0]
    assert record.agent_record_id.encode() in last
    assert record.payload["complete"] is True and stream.closed


async def test_a_client_that_leaves_stops_the_relay_and_the_stream_is_recorded_cut_short() -> None:
    script: list[StreamFrame | float] = [StreamFrame(_chunk(str(i))) if i % 2 == 0 else 0.02 for i in range(40)]
    sent, store, stream = await _relay([*script, StreamFrame(b"data: [DONE]\n\n", terminal=True)], 0.1)
    assert stream.closed and stream.yielded < 20
    assert not any(m.get("more_body") is False for m in sent)  # the body was never finished
    (record,) = store.records
    assert record.payload["complete"] is False and record.payload["error"] == "stream cut short"
