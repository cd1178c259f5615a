"""One table from domain errors to HTTP responses; routes hold no try/except."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from reef.core.errors import ReefError, Unavailable, UpstreamError, UpstreamRejected, UpstreamTimeout
from reef.service.state import state_of

log = logging.getLogger(__name__)


def error_response(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = orjson.dumps({"error": {"type": type_, "message": message}})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _field_of(loc: tuple) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def reef_error_response(exc: ReefError, metrics: Any) -> Response:
    """A domain error's response: its status, the error body (docs/reference/http-api.md), Retry-After if saturated."""
    if isinstance(exc, UpstreamRejected):  # relayed as the upstream sent it
        return Response(exc.body, status_code=exc.status, media_type="application/json")
    headers = None
    if isinstance(exc, Unavailable):
        headers = {"retry-after": str(max(1, round(exc.retry_after_s)))}
    if isinstance(exc, UpstreamError | UpstreamTimeout):
        metrics.upstream_errors.labels(str(exc.status)).inc()
    return error_response(exc.status, exc.type, exc.message, headers)


def unexpected_error_response(method: str, path: str) -> Response:
    log.exception("unhandled error on %s %s", method, path)
    return error_response(500, "internal_error", "internal error; see the server log")


def install_error_handlers(app: FastAPI) -> None:
    """Map ReefError, validation errors and stray exceptions to the error shape (docs/reference/http-api.md)."""

    @app.exception_handler(ReefError)
    async def _reef_error(request: Request, exc: ReefError) -> Response:
        return reef_error_response(exc, state_of(request).metrics)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _field_of(tuple(first.get("loc", ())))
        return error_response(400, "invalid_request_error", f"{field}: {first.get('msg', 'invalid')}")

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        type_ = {404: "not_found_error", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, type_, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        return unexpected_error_response(request.method, request.url.path)
