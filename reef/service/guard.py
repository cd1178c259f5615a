"""What keeps a web browser from driving Reef: the Host a request names, the Origin of a state-changing request, and
the content type of a request body.

A server with no token answers whoever reaches its port, and a browser reaches loopback ports for any web page:
through DNS rebinding (a page's own name made to resolve to 127.0.0.1, so its scripts read Reef's answers) or with a
cross-site "simple" request (a form or `fetch` posting `text/plain`, which needs no CORS preflight). So a server with
no token answers only Hosts it knows (the loopback names, `reef.host`, `reef.allowed_hosts`, the host of
`reef.public_url` and the address the connection reached) and refuses a state-changing request from a page of another
origin. On every server a request body of a state-changing method must be JSON (or JSON lines where a route takes
them): a browser cannot send such a body across sites without a CORS preflight, which Reef never grants. A server
with tokens skips the Host and Origin checks: a browser holds no token for another site's page to use.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import NamedTuple

from reef.core.settings import ServerSettings

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::", "[::]"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Bodies Reef reads: JSON, and JSON lines (`POST /reef/scenarios/{scenario}/tasks`). Each needs a CORS preflight.
_JSON_LINES = frozenset(
    {b"application/x-ndjson", b"application/jsonl", b"application/x-jsonlines", b"application/jsonlines"}
)
_OPEN_TO_ANY_HOST = frozenset({"/healthz"})  # balancers probe it by whatever name they know; it says only "ok"


class Refusal(NamedTuple):
    """An answer the guard gives instead of the route: status, error type and a message naming the setting."""

    status: int
    type: str
    message: str


def host_name(authority: str) -> str:
    """The name in a Host header or an origin's authority, lower-cased, without port or IPv6 brackets."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[1:end] if end > 0 else authority
    if authority.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        return authority.partition(":")[0]
    return authority


def is_json_type(content_type: bytes) -> bool:
    """Whether a Content-Type names JSON (`application/json`, `application/*+json`) or JSON lines."""
    media = content_type.partition(b";")[0].strip().lower()
    return (
        media == b"application/json"
        or (media.startswith(b"application/") and media.endswith(b"+json"))
        or (media in _JSON_LINES)
    )


class RequestGuard:
    """Checks a request's Host, Origin and body type before any route runs (see the module's description).

    `allowed_hosts` are the names configured in `reef.allowed_hosts` (`*`: any); `server_host` is `reef.host`;
    `checks_browsers`: whether the Host and Origin checks apply (a server with no token).
    """

    def __init__(self, allowed_hosts: Iterable[str], server_host: str, *, checks_browsers: bool) -> None:
        listed = {host_name(name) for name in allowed_hosts if name.strip()}
        self.any_host = "*" in listed
        self.listed = frozenset(listed - {"*"})  # pages at these names may post too (a proxy's public name)
        names = set(LOOPBACK_NAMES) | self.listed
        if server_host.strip().lower() not in _WILDCARD_ADDRESSES:
            names.add(host_name(server_host))
        self.names = frozenset(names)
        self.checks_browsers = checks_browsers

    @classmethod
    def for_settings(cls, server: ServerSettings) -> RequestGuard:
        """The guard of a deployment: browser checks on when it has no token at all."""
        checks = not server.all_tokens() and not server.all_admin_tokens()
        public = [urllib.parse.urlsplit(server.public_url).netloc] if server.public_url else []
        return cls([*server.allowed_hosts, *public], server.host, checks_browsers=checks)

    def refusal(self, scope: dict) -> Refusal | None:
        """Why the request is refused, or None to let it through."""
        method = scope["method"]
        changes = method in STATE_CHANGING
        if not changes and not self.checks_browsers:
            return None
        host = origin = content_type = None
        has_body = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                has_body = value.strip() not in (b"", b"0")
            elif name == b"transfer-encoding":
                has_body = True
        if self.checks_browsers:
            if host is not None and not self._host_allowed(host, scope):
                return Refusal(
                    421,
                    "misdirected_request",
                    f"this server does not answer to the Host {host!r}; a name it should answer to goes in "
                    "reef.allowed_hosts",
                )
            if changes and origin is not None and not self._origin_allowed(origin, host):
                return Refusal(
                    403,
                    "permission_error",
                    f"a {method} from a page of another origin ({origin}) is refused; a name whose pages may call "
                    "this server goes in reef.allowed_hosts",
                )
        # A body with no content type at all comes from a program (a browser sends an Origin with it, checked above).
        if changes and has_body and content_type is not None and not is_json_type(content_type):
            return Refusal(
                415,
                "unsupported_media_type",
                f"a request body must be JSON (content-type: application/json), not {content_type.decode('latin-1')!r}",
            )
        return None

    def _host_allowed(self, host: str, scope: dict) -> bool:
        if self.any_host or scope["path"] in _OPEN_TO_ANY_HOST:
            return True
        name = host_name(host)
        if name in self.names:
            return True
        # The address the connection reached (an IP literal for a TCP socket): a rebound name never equals it.
        server = scope.get("server")
        return server is not None and isinstance(server[0], str) and host_name(server[0]) == name

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        if self.any_host:
            return True
        scheme, separator, authority = origin.strip().lower().partition("://")
        if not separator or scheme not in ("http", "https") or not authority:
            return False  # `null` (a sandboxed frame, a file) or anything else that names no web origin
        # The same origin (the console, the API page): its authority is the Host the request names.
        if host is not None and authority == host.strip().lower():
            return True
        return host_name(authority) in self.listed
