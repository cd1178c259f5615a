"""The error hierarchy: each error knows its HTTP status and wire `type`.

The service maps any `ReefError` to `{"error": {"type", "message"}}` with `status`; routes hold no try/except.
"""

from __future__ import annotations


class ReefError(Exception):
    """Base of every domain error; `status` is the HTTP status it maps to."""

    status = 500
    type = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ReefError):
    """The input is invalid; `field` names the offending field (dotted path) when one is to blame."""

    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class Unauthorized(ReefError):
    status = 401
    type = "authentication_error"


class Forbidden(ReefError):
    """The token is valid but its scope does not reach the route; the message names the scope it needs."""

    status = 403
    type = "permission_error"


class NotFound(ReefError):
    status = 404
    type = "not_found_error"


class Conflict(ReefError):
    status = 409
    type = "conflict_error"


class PayloadTooLarge(ReefError):
    status = 413
    type = "request_too_large"


class Unavailable(ReefError):
    """The server is saturated (e.g. the local engine's queue is full); retry after `retry_after_s`."""

    status = 503
    type = "overloaded_error"

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UpstreamError(ReefError):
    """The upstream provider failed (5xx) or could not be reached."""

    status = 502
    type = "upstream_error"


class UpstreamTimeout(ReefError):
    status = 504
    type = "upstream_timeout"


class UpstreamRejected(ReefError):
    """The upstream refused a streaming request (4xx) before any frame: relay `status` and `body` as they came.

    `type` and `message` are taken from the upstream's error body, so the generic error mapping stays faithful.
    """

    def __init__(self, status: int, body: bytes, type_: str = "invalid_request_error", message: str = "") -> None:
        super().__init__(message or f"the upstream answered {status}")
        self.status = status
        self.type = type_
        self.body = body
