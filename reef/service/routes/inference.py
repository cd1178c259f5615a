"""Inference routes: provider-native bodies in, provider-native bodies out, every interaction recorded.

The receipt (`x-reef-agent-record-id`) is sent only once the record is durable; for streams it is sent in-band
just before the terminal frame, which is held back until then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from reef.core.records import Record
from reef.core.scenarios import Dialect
from reef.inference.base import CompletionStream, RequestContext
from reef.inference.sse import receipt_frames
from reef.service.deps import json_object, live_scenario, release_pin_of, scenario_of, tags_of

router = APIRouter(include_in_schema=False)
log = logging.getLogger("reef.service")
_background: set[asyncio.Task] = set()


def _inference_record(
    scenario: str,
    dialect: Dialect,
    request_body: dict[str, Any],
    response_body: dict[str, Any],
    *,
    release_id: str | None,
    tags: dict[str, str],
    started_at: float,
    complete: bool,
    stream: bool,
    usage: dict[str, Any] | None,
    training: dict[str, Any] | None,
    error: str | None = None,
) -> Record:
    finished_at = time.time()
    payload: dict[str, Any] = {
        "dialect": dialect.value,
        "request": request_body,
        "response": response_body,
        "release_id": release_id,
        "tags": tags,
        "complete": complete,
        "stream": stream,
        "usage": usage,
        "timing": {"started_at": started_at, "duration_s": round(finished_at - started_at, 6)},
    }
    if training is not None:
        payload["training"] = training
    if error is not None:
        payload["error"] = error
    return Record.new(scenario, "inference", payload, created_at=finished_at)


def _release_headers(release_id: str | None) -> dict[str, str]:
    return {"x-reef-release-id": release_id} if release_id else {}


async def _serve(request: Request, dialect: Dialect) -> Response:
    started_at = time.time()
    scenario = scenario_of(request)
    body = await json_object(request)
    await live_scenario(request, scenario)
    state = request.app.state
    ctx: RequestContext = state.runtime.context_for(scenario, release_pin_of(request))
    tags = tags_of(request)
    if body.get("stream") is True:
        stream = await state.engine.stream(dialect, body, ctx)
        return _streaming_response(request, dialect, scenario, stream, tags, started_at)
    completion = await state.engine.complete(dialect, body, ctx)
    if completion.status >= 400:  # an upstream 4xx is relayed as it came, and not recorded
        return Response(completion.raw, status_code=completion.status, media_type="application/json")
    record = _inference_record(
        scenario,
        dialect,
        completion.request,
        completion.body,
        release_id=completion.release_id,
        tags=tags,
        started_at=started_at,
        complete=True,
        stream=False,
        usage=completion.usage,
        training=completion.training,
    )
    await state.records.append_async([record])
    state.metrics.records_appended.labels("inference").inc()
    state.runtime.notify(scenario)
    headers = {"x-reef-agent-record-id": record.agent_record_id, **_release_headers(completion.release_id)}
    return Response(completion.raw, status_code=200, media_type="application/json", headers=headers)


def _streaming_response(
    request: Request,
    dialect: Dialect,
    scenario: str,
    stream: CompletionStream,
    tags: dict[str, str],
    started_at: float,
) -> StreamingResponse:
    state = request.app.state

    def record_of(error: str | None = None) -> Record:
        result = stream.result()
        return _inference_record(
            scenario,
            dialect,
            stream.request,
            result.body,
            release_id=stream.release_id,
            tags=tags,
            started_at=started_at,
            complete=result.complete and error is None,
            stream=True,
            usage=result.usage,
            training=result.training,
            error=error or result.error,
        )

    async def frames() -> AsyncIterator[bytes]:
        recorded = False
        try:
            terminal = None
            async for frame in stream.frames():
                if frame.terminal:
                    terminal = frame
                    break
                yield frame.data
            record = record_of()
            await state.records.append_async([record])
            recorded = True
            state.metrics.records_appended.labels("inference").inc()
            state.runtime.notify(scenario)
            if terminal is not None:
                yield receipt_frames(dialect, terminal, stream.last_chunk, record.agent_record_id)
        finally:
            if not recorded:
                # The client left or the upstream broke: keep what was produced, marked incomplete.
                task = asyncio.get_running_loop().create_task(_record_cut_stream(state, record_of("stream cut short")))
                _background.add(task)
                task.add_done_callback(_background.discard)
            await stream.aclose()

    headers = {"cache-control": "no-cache", "x-accel-buffering": "no", **_release_headers(stream.release_id)}
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


async def _record_cut_stream(state: Any, record: Record) -> None:
    try:
        await state.records.append_async([record])
        state.metrics.records_appended.labels("inference").inc()
    except Exception:
        log.exception("could not record a cut stream of scenario %s", record.scenario)


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await _serve(request, Dialect.CHAT)


@router.post("/v1/responses")
async def responses(request: Request) -> Response:
    return await _serve(request, Dialect.RESPONSES)


@router.post("/v1/messages")
async def messages(request: Request) -> Response:
    return await _serve(request, Dialect.MESSAGES)


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request) -> Response:
    scenario = scenario_of(request)
    body = await json_object(request)
    await live_scenario(request, scenario)
    ctx = request.app.state.runtime.context_for(scenario, release_pin_of(request))
    counted = await request.app.state.engine.count_tokens(body, ctx)
    return Response(orjson.dumps(counted), media_type="application/json")


@router.get("/v1/models")
async def models(request: Request) -> Response:
    data = request.app.state.engine.models()
    return Response(orjson.dumps({"object": "list", "data": data}), media_type="application/json")
