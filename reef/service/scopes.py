"""Which token reaches which route: one table, read by the edge middleware before any route runs.

Three scopes, each reaching what the one below reaches: `episode` (a gate episode's short-lived token:
`/v1/*` of its own scenario only), `agent` (the tokens an agent carries: `reef.tokens`, `reef.token`, `REEF_TOKEN`)
and `admin` (`reef.admin_tokens`: everything). A few routes are open (`/healthz`, the API document, the console's
static page). A route not in the table needs `admin`, so a new route is closed until it is declared here.

With no admin token configured the agent tokens are admin (as before scopes existed); with no token at all every
route is open, except to a request that presents an episode token: that one is held to the episode scope whatever
is configured (`reef.service.middleware`), and a gate episode's requests always carry one.
"""

from __future__ import annotations

import enum
import re


class Scope(enum.IntEnum):
    """What a token may reach; a larger scope reaches everything a smaller one does."""

    OPEN = 0
    EPISODE = 1
    AGENT = 2
    ADMIN = 3


_S = r"[^/]+"  # one path segment (a scenario name)

# (method or "*", path pattern, scope it needs). Anything else needs ADMIN.
ROUTE_SCOPES: tuple[tuple[str, str, Scope], ...] = (
    ("GET", "/healthz", Scope.OPEN),
    ("GET", "/openapi.json", Scope.OPEN),
    ("GET", "/docs", Scope.OPEN),
    ("GET", "/docs/oauth2-redirect", Scope.OPEN),
    ("GET", "/docs/assets/.+", Scope.OPEN),  # Swagger UI's own files (reef.service.openapi_pages)
    ("GET", "/redoc", Scope.OPEN),
    ("GET", "/console", Scope.OPEN),  # the page and its scripts hold no data; the data routes need admin
    ("GET", "/console/.+", Scope.OPEN),  # the console route serves only its own files (404 otherwise)
    ("*", "/v1/.*", Scope.EPISODE),
    ("POST", "/reef/report", Scope.AGENT),
    ("GET", "/reef/status", Scope.AGENT),
    ("GET", "/reef/harness", Scope.AGENT),
    ("GET", "/reef/harness/releases", Scope.AGENT),
    ("GET", "/reef/harness/versions", Scope.AGENT),
    ("GET", "/reef/harness/adapters", Scope.AGENT),
    ("GET", "/reef/harness/install", Scope.AGENT),
    ("POST", "/reef/harness/proposals", Scope.AGENT),
    ("GET", f"/reef/scenarios/{_S}/contract", Scope.AGENT),
    ("GET", f"/reef/scenarios/{_S}/archive", Scope.AGENT),
    ("GET", f"/reef/scenarios/{_S}/archive/next", Scope.AGENT),
)
_COMPILED = tuple((method, re.compile(pattern), scope) for method, pattern, scope in ROUTE_SCOPES)


def required_scope(method: str, path: str) -> Scope:
    """The scope a request needs (HEAD counts as GET); ADMIN for anything the table does not name."""
    if path.startswith("/v1/"):  # the hot path: no pattern to try
        return Scope.EPISODE
    method = "GET" if method == "HEAD" else method
    for allowed, pattern, scope in _COMPILED:
        if (allowed == "*" or allowed == method) and pattern.fullmatch(path):
            return scope
    return Scope.ADMIN


def scope_words(scope: Scope) -> str:
    """How a 403 names the scope a route needs."""
    if scope is Scope.ADMIN:
        return "the admin scope (a token from reef.admin_tokens)"
    if scope is Scope.AGENT:
        return "the agent scope (a token from reef.tokens or reef.admin_tokens)"
    return "a configured token"
