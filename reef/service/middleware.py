"""Pure-ASGI middleware: auth and token scopes (`reef.service.scopes`), body-size limit, the Host, Origin and body-type
checks (`reef.service.guard`), request metrics labelled by route template and, when on, request spans (cheaper than
BaseHTTPMiddleware)."""

from __future__ import annotations

import hmac
import time
from collections.abc import MutableMapping
from typing import Any

import orjson

from reef.core.episode_tokens import EpisodeClaims, EpisodeKey, looks_like_episode_token
from reef.core.errors import PayloadTooLarge
from reef.observability import tracing
from reef.observability.tracing import RequestSpan, Tracing
from reef.service.guard import RequestGuard
from reef.service.metrics import ServiceMetrics
from reef.service.scopes import Scope, required_scope, scope_words

_FIXED_ROUTES = frozenset(
    {
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/models",
        "/reef/report",
        "/reef/records",
        "/reef/records/batch",
        "/reef/status",
        "/reef/scenarios",
        "/healthz",
        "/metrics",
    }
)


UNMATCHED = "unmatched"  # the route label of every request that reached no route (refused before routing, or a 404)


def route_label(path: str) -> str:
    """A request's route label before routing: a fixed route's path, else `unmatched` (never the raw path, so junk
    paths cannot grow `/metrics`)."""
    return path if path in _FIXED_ROUTES else UNMATCHED


def routed_label(scope: MutableMapping[str, Any], before: str) -> str:
    """A request's route label once it ran: the template of the framework route that took it
    (`/reef/scenarios/{scenario}/tasks`), else its label before routing."""
    template = getattr(scope.get("route"), "path", None)
    return template if isinstance(template, str) else before


async def _send_error(send: Any, status: int, type_: str, message: str, extra: list | None = None) -> None:
    body = orjson.dumps({"error": {"type": type_, "message": message}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def _start_span(active: Tracing, scope: dict, label: str) -> RequestSpan:
    """The request's server span: route, method, path and the scenario asked for (handlers add to its notes)."""
    scenario = traceparent = tracestate = None
    for name, value in scope["headers"]:
        if name == b"x-reef-scenario":
            scenario = value.decode("latin-1")
        elif name == b"traceparent":
            traceparent = value.decode("latin-1")
        elif name == b"tracestate":
            tracestate = value.decode("latin-1")
    method = scope["method"]
    attributes = {
        "http.request.method": method,
        "http.route": label,
        "url.path": scope["path"],
        "reef.scenario": scenario,
    }
    span = active.request(f"{method} {label}", attributes, traceparent, tracestate)
    scope[tracing.SCOPE_NOTES] = span.notes
    return span


def _note_response(span: RequestSpan, headers: list[tuple[bytes, bytes]]) -> None:
    for name, value in headers:
        if name == b"x-reef-agent-record-id":
            span.notes["reef.agent_record_id"] = value.decode("latin-1")
        elif name == b"x-reef-release-id":
            span.notes["reef.release_id"] = value.decode("latin-1")


def _finish_span(span: RequestSpan, scope: dict, status: int) -> None:
    # A framework route knows its template (`/reef/scenarios/{scenario}/records`): a better name than the label.
    template = getattr(scope.get("route"), "path", None)
    if isinstance(template, str):
        span.rename(f"{scope['method']} {template}")
        span.set_attribute("http.route", template)
    span.finish(status)


SCOPE_KEY = "reef.scope"  # the request's token scope, for the few routes whose answer depends on it


def held_scope(scope: MutableMapping[str, Any]) -> Scope:
    """The scope the request's token holds (ADMIN where no token is configured or the route is open)."""
    held = scope.get(SCOPE_KEY)
    return held if isinstance(held, Scope) else Scope.ADMIN


EPISODE_KEY = "reef.episode"  # the claims of the episode token a request came with (set by the middleware only)


def episode_of(scope: MutableMapping[str, Any]) -> EpisodeClaims | None:
    """The gate episode a request belongs to, as its verified episode token says; None for any other request."""
    claims = scope.get(EPISODE_KEY)
    return claims if isinstance(claims, EpisodeClaims) else None


def _presented(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The credentials a request presents (`authorization: Bearer …`, `x-api-key`)."""
    presented: list[bytes] = []
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            presented.append(value[7:].strip())
        elif name == b"x-api-key":
            presented.append(value.strip())
    return presented


def _names_scenario(headers: list[tuple[bytes, bytes]], scenario: str) -> bool:
    """Whether the request names `scenario` in `x-reef-scenario`, and no other."""
    named = [value for name, value in headers if name == b"x-reef-scenario"]
    return bool(named) and all(value.decode("latin-1") == scenario for value in named)


class EdgeMiddleware:
    """Checks tokens and their scopes (constant time, never logged), enforces `max_body_bytes`, counts requests,
    and (when tracing is on) gives each request a span.

    `tokens` are the agent tokens, `admin_tokens` the admin ones; with no admin token the agent tokens are admin.
    `episodes` verifies gate episodes' tokens: a request that presents one is held to the episode scope and to the
    token's scenario, with or without configured tokens (with none, every other request is open).
    """

    def __init__(
        self,
        app: Any,
        tokens: list[str],
        max_body_bytes: int,
        metrics: ServiceMetrics,
        fast_path: Any = None,
        admin_tokens: list[str] | None = None,
        episodes: EpisodeKey | None = None,
        guard: RequestGuard | None = None,
    ) -> None:
        self.app = app
        self.guard = guard  # Host, Origin and body-type checks (reef.service.guard); None: none
        self.fast_path = fast_path  # raw ASGI handlers served before the framework (the /v1 hot path)
        admins = list(admin_tokens or [])
        self.episodes = episodes
        agent_scope = Scope.AGENT if admins else Scope.ADMIN
        self.tokens = [(t.encode(), agent_scope) for t in tokens] + [(t.encode(), Scope.ADMIN) for t in admins]
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    def _scope_of(self, presented: list[bytes]) -> tuple[Scope | None, EpisodeClaims | None]:
        """The largest scope among the presented tokens, with the episode's claims when that scope is an episode
        token's; (None, None) when none is valid."""
        found: Scope | None = None
        claims: EpisodeClaims | None = None
        for candidate in presented:
            for token, scope in self.tokens:
                # Evaluate every comparison so timing does not reveal which token matched.
                if hmac.compare_digest(candidate, token) and (found is None or scope > found):
                    found = scope
            if claims is None and self.episodes is not None and looks_like_episode_token(candidate):
                claims = self.episodes.verify(candidate.decode("latin-1"))
        if found is not None:
            return found, None
        return (Scope.EPISODE, claims) if claims is not None else (None, None)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path: str = scope["path"]
        label = route_label(path)
        status_box = [500]
        # Tracing off costs this one check (and two `is not None` below): no span, no OpenTelemetry code.
        # Health probes come every few seconds from every balancer: traced, they would bury the requests.
        span = None if tracing.active is None or path == "/healthz" else _start_span(tracing.active, scope, label)

        async def send_counting(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
                if span is not None:
                    _note_response(span, message["headers"])
            await send(message)

        try:
            headers = scope["headers"]
            presented = _presented(headers)
            # With no token configured every route is open, except to an episode token's holder: it stays an episode.
            checked = bool(self.tokens) or any(looks_like_episode_token(p) for p in presented)
            needed = required_scope(scope["method"], path) if checked else Scope.OPEN
            if needed is not Scope.OPEN:
                held, claims = self._scope_of(presented)
                if held is None:
                    status_box[0] = 401
                    await _send_error(send, 401, "authentication_error", "missing or invalid token")
                    return
                if held < needed:
                    status_box[0] = 403
                    await _send_error(send, 403, "permission_error", f"this route needs {scope_words(needed)}")
                    return
                if claims is not None and not _names_scenario(headers, claims.scenario):
                    status_box[0] = 403
                    message = f"this episode token reaches only scenario {claims.scenario!r} (x-reef-scenario)"
                    await _send_error(send, 403, "permission_error", message)
                    return
                scope[SCOPE_KEY] = held
                if claims is not None:
                    scope[EPISODE_KEY] = claims
            for name, value in headers:
                if name == b"content-length":
                    try:
                        too_large = int(value) > self.max_body_bytes
                    except ValueError:
                        too_large = False
                    if too_large:
                        status_box[0] = 413
                        await _send_error(send, 413, "request_too_large", f"body exceeds {self.max_body_bytes} bytes")
                        return
            refused = self.guard.refusal(scope) if self.guard is not None else None
            if refused is not None:
                status_box[0] = refused.status
                await _send_error(send, refused.status, refused.type, refused.message)
                return
            if self.fast_path is not None and self.fast_path.handles(scope):
                await self.fast_path(scope, self._limited(receive), send_counting)
            else:
                await self.app(scope, self._limited(receive), send_counting)
        except Exception as exc:
            if span is not None:
                span.record_exception(exc)
            raise
        finally:
            self.metrics.observe_request(routed_label(scope, label), status_box[0], time.perf_counter() - started)
            if span is not None:
                _finish_span(span, scope, status_box[0])

    def _limited(self, receive: Any) -> Any:
        seen = [0]
        limit = self.max_body_bytes

        async def receive_limited() -> dict:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise PayloadTooLarge(f"body exceeds {limit} bytes")
            return message

        return receive_limited
