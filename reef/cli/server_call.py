"""Calling a running server's `/reef/*` routes from a CLI command: one request, its error as one line."""

from __future__ import annotations

import argparse
from typing import Any

import httpx

from reef.cli.status import server_headers

_TIMEOUT_S = 30.0


class CommandError(Exception):
    """A failure to report to the user as one line (exit status 1)."""


def call(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """`method path` on the server at `args.url` with `args.token`; the JSON answer, or CommandError naming the
    status and the server's message."""
    url = f"{args.url.rstrip('/')}{path}"
    try:
        response = httpx.request(
            method, url, json=body, headers={**server_headers(args), **(headers or {})}, timeout=_TIMEOUT_S
        )
    except httpx.HTTPError as error:
        raise CommandError(f"cannot reach {args.url}: {error}")
    if response.status_code >= 400:
        try:
            detail = response.json()["error"]
            message = f"{detail.get('type', 'error')}: {detail.get('message', '')}"
        except (ValueError, KeyError, TypeError):
            message = response.text[:500]
        raise CommandError(f"{response.status_code} {message}")
    return response.json()
