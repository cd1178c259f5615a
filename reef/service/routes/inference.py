"""Inference routes: provider-native bodies in, provider-native bodies out, every interaction recorded.

The receipt (`x-reef-agent-record-id`) is sent only once the record is durable; for streams it is sent in-band
just before the terminal frame, which is held back until then.

These are the hot path, so they are plain ASGI handlers dispatched by `EdgeMiddleware` before FastAPI's routing
(measured: several times the throughput); errors go through the same table (`reef.service.errors`).

Tags under `reef-` are Reef's own: a client that sends `x-reef-tag-reef-…` gets a 400 naming the header. A gate
episode's requests (those that came with an episode token) are tagged `reef-episode` with the token's episode id,
and their usage counts against the learner's upstream budget. A pin (`x-reef-release-id`) to a pending release
other than an open rollout's canary needs the admin scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import Response

from reef.core.errors import BadRequest, Forbidden, ReefError
from reef.core.payloads import InferencePayload, TrainingCapture
from reef.core.records import Record
from reef.core.scenarios import Dialect
from reef.inference.base import CompletionStream, RequestContext
from reef.inference.sse import receipt_frames
from reef.observability import tracing
from reef.service.deps import json_object, live_scenario, release_pin_of, scenario_of, tags_of
from reef.service.errors import reef_error_response, unexpected_error_response
from reef.service.middleware import episode_of, held_scope
from reef.service.scopes import Scope, scope_words
from reef.service.state import ServiceState

log = logging.getLogger(__name__)
_background: set[asyncio.Task] = set()
T = TypeVar("T")
RESERVED_TAG_PREFIX = "reef-"  # tags Reef sets itself (`reef-episode`); never taken from a client


def _client_tags(request: Request) -> dict[str, str]:
    """The request's `x-reef-tag-*` tags; a 400 naming the header when one is under `reef-` (Reef's own)."""
    tags = tags_of(request)
    for name in tags:
        if name.startswith(RESERVED_TAG_PREFIX):
            raise BadRequest(f"tags under `{RESERVED_TAG_PREFIX}` are reserved to Reef", field=f"x-reef-tag-{name}")
    return tags


async def _route(
    state: ServiceState, request: Request, scenario: str, tags: dict[str, str]
) -> tuple[RequestContext, str | None]:
    """The request's context and rollout (`route_request`). A pin (`x-reef-release-id`) to a pending release,
    unreviewed or a canary no longer in a rollout, needs the admin scope (403 otherwise); the open rollout's canary,
    whose answers agents get anyway, and the learner's lineage tip may be pinned by whoever may call the model.
    The pin is routed first, so an unknown one is a 404 answered from the serving layer's memory."""
    pinned = release_pin_of(request)
    routed = await state.runtime.route_request(scenario, pinned, tags)
    if pinned is None or held_scope(request.scope) >= Scope.ADMIN or not state.runtime.pinned_pending(scenario, pinned):
        return routed
    rollout = await asyncio.to_thread(state.runtime.rollout, scenario)
    if rollout.get("state") == "canary" and rollout.get("candidate_release_id") == pinned:
        return routed
    raise Forbidden(f"release {pinned} is pending; pinning it needs {scope_words(Scope.ADMIN)}")


def _upstream(notes: dict[str, Any] | None, call: Awaitable[T]) -> Awaitable[T]:
    """The engine call, timed into the request span's notes while tracing is on (`notes` is None when off)."""
    return call if notes is None else tracing.timed(notes, "reef.upstream_latency_s", call)


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
    training: TrainingCapture | None,
    error: str | None = None,
    rollout_id: str | None = None,
) -> Record:
    finished_at = time.time()
    payload: InferencePayload = {
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
    if rollout_id is not None:  # the rollout that chose the serving release (its arm: `release_id`)
        payload["rollout_id"] = rollout_id
    return Record.new(scenario, "inference", dict(payload), created_at=finished_at)


async def _serve(state: ServiceState, request: Request, dialect: Dialect) -> JsonBody | StreamRelay:
    started_at = time.time()
    scenario = scenario_of(request)
    body = await json_object(request)
    tags = _client_tags(request)
    episode = episode_of(request.scope)  # the learner's own traffic: a gate episode's request, by its token
    if episode is not None:
        tags["reef-episode"] = episode.episode_id
    await live_scenario(state, scenario)
    ctx, rollout_id = await _route(state, request, scenario, tags)
    notes = request.scope.get(tracing.SCOPE_NOTES)
    try:
        if body.get("stream") is True:
            # For a stream the upstream latency is the time until it is open (the upstream's response head).
            stream = await _upstream(notes, state.engine.stream(dialect, body, ctx))
            return _streaming_response(
                state, dialect, scenario, stream, tags, started_at, rollout_id, learner=episode is not None
            )
        completion = await _upstream(notes, state.engine.complete(dialect, body, ctx))
    except Exception as exc:
        if rollout_id is not None and (not isinstance(exc, ReefError) or exc.status >= 500):
            await state.runtime.request_failed(scenario, rollout_id, ctx)  # a 5xx or a timeout counts for its arm
        raise
    if completion.status >= 400:  # an upstream 4xx is relayed as it came, and not recorded
        if rollout_id is not None and completion.status >= 500:
            await state.runtime.request_failed(scenario, rollout_id, ctx)
        return JsonBody(completion.status, completion.raw, [])
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
        rollout_id=rollout_id,
    )
    await _remember(state, record, learner=episode is not None)
    headers = [(b"x-reef-agent-record-id", record.agent_record_id.encode())]
    if completion.release_id:
        headers.append((b"x-reef-release-id", completion.release_id.encode()))
    return JsonBody(200, completion.raw, headers)


class JsonBody:
    """A JSON answer as two plain ASGI messages (a generic Response object costs more on the hot path)."""

    __slots__ = ("status", "body", "headers")

    def __init__(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(self.body)), *self.headers]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


def _streaming_response(
    state: ServiceState,
    dialect: Dialect,
    scenario: str,
    stream: CompletionStream,
    tags: dict[str, str],
    started_at: float,
    rollout_id: str | None = None,
    learner: bool = False,
) -> StreamRelay:
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
            rollout_id=rollout_id,
        )

    headers = [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]
    if stream.release_id:
        headers.append((b"x-reef-release-id", stream.release_id.encode()))
    return StreamRelay(state, dialect, stream, record_of, headers, learner)


class _ClientLeft(Exception):
    pass


class StreamRelay:
    """An SSE relay over plain ASGI (no task group per stream, fewer writes than a generic streaming response).

    Frames that arrived together go out in one write; the held-back terminal frame goes out with the receipt
    and the end of the body, once the record is durable. A client that leaves ends the relay at the next
    frame, and what was produced is recorded as cut short.
    """

    def __init__(
        self,
        state: ServiceState,
        dialect: Dialect,
        stream: CompletionStream,
        record_of: Callable[..., Record],
        headers: list[tuple[bytes, bytes]],
        learner: bool = False,
    ) -> None:
        self.state = state
        self.dialect = dialect
        self.stream = stream
        self.record_of = record_of
        self.headers = headers
        self.learner = learner  # a gate episode's stream: its usage counts against the learner's budget

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        stream = self.stream
        # The head goes out with the first frames (at hand once the stream is open): one write, not two.
        started = False

        async def send_body(body: bytes, more: bool) -> None:
            nonlocal started
            if not started:
                started = True
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
            await send({"type": "http.response.body", "body": body, "more_body": more})

        # Once the request body is read, `receive` answers only when the client goes away (or we finish). Watched
        # from the first frame sent before the end: a stream that arrives whole never needs the watcher.
        left: asyncio.Future[Any] | None = None
        recorded = False
        try:
            held: list[bytes] = []
            terminal = None
            async for frame in stream.frames():
                if frame.terminal:
                    terminal = frame
                    break
                held.append(frame.data)
                if frame.more:
                    continue
                if left is None:
                    left = asyncio.ensure_future(receive())
                elif left.done():
                    raise _ClientLeft
                await send_body(b"".join(held), True)
                held = []
            record = self.record_of()
            await _remember(self.state, record, self.learner)
            recorded = True
            notes = scope.get(tracing.SCOPE_NOTES)
            if notes is not None:  # a stream's receipt goes in-band, not in a header the middleware sees
                notes["reef.agent_record_id"] = record.agent_record_id
            if terminal is not None:
                held.append(receipt_frames(self.dialect, terminal, stream.last_chunk, record.agent_record_id))
            await send_body(b"".join(held), False)
        except _ClientLeft:
            pass
        finally:
            if left is not None:
                left.cancel()
            if not recorded:
                # The client left or the upstream broke: keep what was produced, marked incomplete.
                task = asyncio.get_running_loop().create_task(
                    _record_cut_stream(self.state, self.record_of("stream cut short"), self.learner)
                )
                _background.add(task)
                task.add_done_callback(_background.discard)
                if not started:  # the stream was open: its answer ends cut short, not as an error page
                    with contextlib.suppress(Exception):
                        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
            await stream.aclose()


async def _remember(state: ServiceState, record: Record, learner: bool = False) -> None:
    """Make an inference record durable and count it; `learner`: it is a gate episode's (the token said so), and
    what it spent upstream counts against the learner's budget.

    The learner is not woken: only a report can complete a training unit, and reports wake it (it reads the
    inferences they cite then, or at its next poll), so a busy proxy does not keep it pulling record by record.
    """
    await state.runtime.recording.remember_inference(record)
    state.metrics.count_records("inference")
    if learner:
        payload = record.payload or {}
        usage = payload.get("usage") or (payload.get("response") or {}).get("usage")
        state.runtime.count_learner_usage(record.scenario, usage)


async def _record_cut_stream(state: ServiceState, record: Record, learner: bool = False) -> None:
    try:
        await _remember(state, record, learner)
    except Exception:
        log.exception("could not record a cut stream of scenario %s", record.scenario)


async def _count_tokens(state: ServiceState, request: Request) -> Response:
    scenario = scenario_of(request)
    body = await json_object(request)
    tags = _client_tags(request)
    await live_scenario(state, scenario)
    ctx, _ = await _route(state, request, scenario, tags)
    counted = await state.engine.count_tokens(body, ctx)
    return Response(orjson.dumps(counted), media_type="application/json")


async def _models(state: ServiceState, request: Request) -> Response:
    return Response(orjson.dumps({"object": "list", "data": state.engine.models()}), media_type="application/json")


ROUTES = {
    ("POST", "/v1/chat/completions"): lambda state, request: _serve(state, request, Dialect.CHAT),
    ("POST", "/v1/responses"): lambda state, request: _serve(state, request, Dialect.RESPONSES),
    ("POST", "/v1/messages"): lambda state, request: _serve(state, request, Dialect.MESSAGES),
    ("POST", "/v1/messages/count_tokens"): _count_tokens,
    ("GET", "/v1/models"): _models,
}


class InferenceEndpoints:
    """Dispatches the `/v1/*` routes (docs/reference/http-api.md); `handles(scope)`: is a request one of them."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state

    def handles(self, scope: dict) -> bool:
        return (scope["method"], scope["path"]) in ROUTES

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        handler = ROUTES[(scope["method"], scope["path"])]
        try:
            response = await handler(self.state, request)
        except ReefError as exc:
            response = reef_error_response(exc, self.state.metrics)
        except Exception:
            response = unexpected_error_response(scope["method"], scope["path"])
        await response(scope, receive, send)
