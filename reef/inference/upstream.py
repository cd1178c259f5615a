"""The upstream proxy engine: forwards provider-native requests to an OpenAI / Responses / Anthropic provider.

One pooled HTTP client (`reef.inference.http_client`) serves every request. Bodies go upstream unchanged (only a
missing `model` is filled) and come back byte-exact, unless the client's dialect differs from the upstream's: then
the request, the answer and the event stream are translated on the fly (`reef.inference.translate`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from reef.core.capabilities import ENGINE_SUPPLIES
from reef.core.errors import UpstreamError, UpstreamRejected, UpstreamTimeout
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import Completion, CompletionStream, Engine, RequestContext, StreamFrame, StreamResult
from reef.inference.http_client import HttpClient, HttpClientError, HttpResponse
from reef.inference.sse import SSEEvent, SSESplitter, encode_event, is_terminal, parse_event
from reef.inference.translate import (
    StreamConverter,
    assembler_for,
    check_request,
    convert_error,
    convert_request,
    convert_response,
    with_system_prompt,
)

UPSTREAM_DIALECTS: dict[str, Dialect] = {
    "openai": Dialect.CHAT,
    "responses": Dialect.RESPONSES,
    "anthropic": Dialect.MESSAGES,
}
PATHS: dict[Dialect, str] = {
    Dialect.CHAT: "/v1/chat/completions",
    Dialect.RESPONSES: "/v1/responses",
    Dialect.MESSAGES: "/v1/messages",
}
ANTHROPIC_VERSION = "2023-06-01"
MODELS_PROBE_TIMEOUT_S = 3.0


def base_url(url: str) -> str:
    """The provider's base URL without a trailing `/` or `/v1`."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _parse_json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {"error": {"type": "upstream_error", "message": raw[:2000].decode(errors="replace")}}


def _rejected(status: int, raw: bytes, body: Any) -> UpstreamRejected:
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        detail = {"message": str(detail or "")}
    return UpstreamRejected(status, raw, detail.get("type") or "invalid_request_error", detail.get("message") or "")


class UpstreamEngine(Engine):
    """Answers every request by calling one upstream provider over a pooled HTTP client."""

    supplies = ENGINE_SUPPLIES["upstream"]

    def __init__(self, settings: InferenceSettings) -> None:
        if not settings.upstream_url:
            raise ValueError("inference.upstream_url is required for the upstream engine")
        self._settings = settings
        self._base = base_url(settings.upstream_url)
        self._dialect = UPSTREAM_DIALECTS[settings.upstream_api]
        self._model = settings.upstream_model
        # Identity encoding: the bytes relayed to the client are the upstream's own, never re-encoded.
        self._headers = {"content-type": "application/json", "accept-encoding": "identity"}
        key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else ""
        if self._dialect is Dialect.MESSAGES:
            self._headers["anthropic-version"] = ANTHROPIC_VERSION
            if key:
                self._headers["x-api-key"] = key
        elif key:
            self._headers["authorization"] = f"Bearer {key}"
        self._http: HttpClient | None = None
        self._active: dict[str, str | None] = {}
        self._models: list[dict[str, Any]] = [self._fallback_model()]

    def _fallback_model(self) -> dict[str, Any]:
        return {"id": self._model or "upstream", "object": "model", "created": 0, "owned_by": "upstream"}

    async def start(self) -> None:
        self._http = HttpClient(self._base, self._headers, max_connections=self._settings.max_connections)
        with contextlib.suppress(Exception):  # the model list is a courtesy; an upstream without it still serves
            async with self._http.deadline(min(MODELS_PROBE_TIMEOUT_S, self._settings.timeout_s)):
                response = await self._http.request("GET", "/v1/models")
                try:
                    raw = await response.read()
                finally:
                    response.release()
            data = orjson.loads(raw).get("data") if response.status == 200 else None
            if isinstance(data, list) and data:
                self._models = data

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # --- requests ---------------------------------------------------------------------------------------------

    def _prepare(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> tuple[dict[str, Any], bytes]:
        """(the request as forwarded, in the client's dialect; the upstream body bytes).

        The body is checked only when Reef rewrites it (translation, a harness system prompt): one relayed
        unchanged is the upstream's to judge, and costs no walk over its conversation.
        """
        if ctx.system_prompt or ctx.example_turns or dialect is not self._dialect:
            check_request(dialect, body)
        request = body
        if not body.get("model") and self._model:
            request = {**body, "model": self._model}
        request = with_system_prompt(dialect, request, ctx.system_prompt, ctx.example_turns)
        return request, orjson.dumps(convert_request(request, dialect, self._dialect))

    def _release_id(self, ctx: RequestContext) -> str | None:
        return ctx.release_id or self._active.get(ctx.scenario)

    def _client(self) -> HttpClient:
        if self._http is None:
            raise RuntimeError("UpstreamEngine.start() was not called")
        return self._http

    def _timed_out(self) -> UpstreamTimeout:
        return UpstreamTimeout(f"the upstream did not answer within {self._settings.timeout_s:g} s")

    async def _read_whole(self, path: str, payload: bytes) -> tuple[int, bytes]:
        client = self._client()
        try:
            async with client.deadline(self._settings.timeout_s):
                response = await client.request("POST", path, payload)
                try:
                    raw = await response.read()
                finally:
                    response.release()
        except TimeoutError:
            raise self._timed_out()
        except HttpClientError as exc:
            raise UpstreamError(f"the upstream could not be reached or broke off: {exc}")
        if response.status >= 500:
            raise UpstreamError(f"the upstream answered {response.status}")
        return response.status, raw

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        request, payload = self._prepare(dialect, body, ctx)
        status, raw = await self._read_whole(PATHS[self._dialect], payload)
        parsed = _parse_json(raw)
        if dialect is not self._dialect:
            if status < 400:
                parsed = convert_response(parsed, self._dialect, dialect)
            else:
                parsed = convert_error(parsed, self._dialect, dialect)
            raw = orjson.dumps(parsed)
        if not isinstance(parsed, dict):
            parsed = {"value": parsed}
        usage = parsed.get("usage") if status < 400 else None
        return Completion(status, raw, parsed, request, release_id=self._release_id(ctx), usage=usage)

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        request, payload = self._prepare(dialect, body, ctx)
        timeout_s = self._settings.timeout_s
        try:
            # A stream may run long: only getting its head and each wait for more of it are bounded.
            response = await self._client().request("POST", PATHS[self._dialect], payload, timeout_s)
        except TimeoutError:
            raise self._timed_out()
        except HttpClientError as exc:
            raise UpstreamError(f"the upstream could not be reached: {exc}")
        if response.status >= 400:
            try:
                async with self._client().deadline(timeout_s):
                    raw = await response.read()
            except (TimeoutError, HttpClientError):
                raw = b""
            finally:
                response.release()
            if response.status >= 500:
                raise UpstreamError(f"the upstream answered {response.status}")
            error = convert_error(_parse_json(raw), self._dialect, dialect)
            raw = raw if dialect is self._dialect else orjson.dumps(error)
            raise _rejected(response.status, raw, error)
        relay = UpstreamStream(response, timeout_s, dialect, self._dialect, request, self._release_id(ctx))
        await relay.open()
        return relay

    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        if self._dialect is not Dialect.MESSAGES:
            # Only Anthropic has a counting endpoint; elsewhere estimate (about 4 bytes of JSON per token).
            check_request(Dialect.MESSAGES, body)
            request = with_system_prompt(Dialect.MESSAGES, body, ctx.system_prompt, ctx.example_turns)
            counted = {k: request.get(k) for k in ("system", "messages", "tools")}
            return {"input_tokens": max(1, len(orjson.dumps(counted)) // 4)}
        _, payload = self._prepare(Dialect.MESSAGES, body, ctx)
        status, raw = await self._read_whole("/v1/messages/count_tokens", payload)
        parsed = _parse_json(raw)
        if status >= 400:
            raise _rejected(status, raw, parsed)
        return parsed

    # --- releases and models ----------------------------------------------------------------------------------

    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        # The upstream serves the same model whatever the release; the release id is kept for the record.
        self._active[scenario] = release.release_id if release is not None else None

    def active_release_id(self, scenario: str) -> str | None:
        return self._active.get(scenario)

    def models(self) -> list[dict[str, Any]]:
        return list(self._models)


class UpstreamStream(CompletionStream):
    """One upstream SSE response relayed as client-dialect frames, assembled into the final message as it goes."""

    def __init__(
        self,
        response: HttpResponse,
        timeout_s: float,
        dialect: Dialect,
        upstream: Dialect,
        request: dict[str, Any],
        release_id: str | None,
    ) -> None:
        self.request = request
        self.release_id = release_id
        self.last_chunk = None
        self._response = response
        self._timeout_s = timeout_s
        self._dialect = dialect
        self._converter = None if dialect is upstream else StreamConverter(upstream, dialect)
        self._assembler = assembler_for(dialect)
        self._splitter = SSESplitter()
        self._pending: list[bytes] = []
        self._terminal_seen = False
        self._error: str | None = None
        self._closed = False

    async def open(self) -> None:
        """Read until the first whole event, so a failure before any frame is raised to the caller."""
        try:
            while not self._pending:
                chunk = await self._response.read_chunk(self._timeout_s)
                if not chunk:
                    raise UpstreamError("the upstream closed the stream before any event")
                self._pending = self._splitter.feed(chunk)
        except TimeoutError:
            self._response.close()
            raise UpstreamTimeout("the upstream sent no event in time")
        except HttpClientError as exc:
            self._response.close()
            raise UpstreamError(f"the upstream stream broke: {exc}")
        except UpstreamError:
            self._response.close()
            raise

    def _relay(self, raw: bytes) -> list[tuple[bytes, bool]]:
        """(bytes, terminal) of each client frame one upstream event becomes (byte-exact without translation)."""
        event = parse_event(raw)
        if self._converter is None:
            return [self._observe(event, raw)]
        return [self._observe(out, encode_event(out)) for out in self._converter.feed(event)]

    def _observe(self, event: SSEEvent, raw: bytes) -> tuple[bytes, bool]:
        self._assembler.feed(event)
        if self._dialect is Dialect.CHAT and isinstance(event.data, dict):
            self.last_chunk = event.data
        terminal = is_terminal(self._dialect, event)
        if terminal and isinstance(event.data, dict) and event.name == "response.failed":
            self._error = "the upstream response failed"
        return raw, terminal

    async def frames(self) -> AsyncIterator[StreamFrame]:
        try:
            while True:
                for frame in self._take_pending():
                    if frame.terminal:
                        self._terminal_seen = True  # complete once the client is handed the terminal frame
                        await self._drain()
                        yield frame
                        return
                    yield frame
                if self._closed:
                    return
                chunk = await self._response.read_chunk(self._timeout_s)
                if chunk:
                    self._pending = self._splitter.feed(chunk)
                    continue
                tail = self._splitter.remainder()
                if not tail.strip():
                    return
                # An upstream that ends its last event without the blank line: relay it properly terminated.
                self._pending = self._splitter.feed(b"\r\n\r\n" if tail.endswith(b"\r\n") else b"\n\n")
        except TimeoutError:
            self._error = "the upstream stopped sending in time"
        except HttpClientError as exc:
            self._error = f"the upstream stream broke: {exc}"
        finally:
            self._pending = []
            self._finish_response()

    def _take_pending(self) -> list[StreamFrame]:
        """The client frames of every event read so far, up to and including the terminal one.

        Each but the last is marked `more`: they arrived together and may leave together.
        """
        ready: list[tuple[bytes, bool]] = []
        for raw in self._pending:
            for data, terminal in self._relay(raw):
                ready.append((data, terminal))
                if terminal:
                    break
            if ready and ready[-1][1]:
                break
        self._pending = []
        last = len(ready) - 1
        return [StreamFrame(data, terminal, more=index < last) for index, (data, terminal) in enumerate(ready)]

    async def _drain(self) -> None:
        # Reading to the end of the body lets the connection go back to the pool instead of being dropped.
        with contextlib.suppress(TimeoutError, HttpClientError):
            while await self._response.read_chunk(self._timeout_s):
                pass
        self._finish_response()

    def _finish_response(self) -> None:
        if self._terminal_seen and self._response.at_eof:
            self._response.release()
        else:
            self._response.close()

    def result(self) -> StreamResult:
        return StreamResult(
            body=self._assembler.result(),
            complete=self._terminal_seen,
            usage=self._assembler.usage,
            error=self._error,
        )

    async def aclose(self) -> None:
        self._closed = True
        self._finish_response()
