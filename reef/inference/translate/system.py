"""Prepend a harness system prompt to a request in any dialect, ahead of the client's own system prompt."""

from __future__ import annotations

from typing import Any

from reef.core.scenarios import Dialect


def with_system_prompt(dialect: Dialect, body: dict[str, Any], prompt: str | None) -> dict[str, Any]:
    """A copy of `body` (one `check_request` passed) whose system prompt starts with `prompt` (`body` if no prompt)."""
    if not prompt:
        return body
    if dialect is Dialect.MESSAGES:
        system = body.get("system")
        if isinstance(system, list):
            return {**body, "system": [{"type": "text", "text": prompt}, *system]}
        return {**body, "system": f"{prompt}\n\n{system}" if system else prompt}
    if dialect is Dialect.RESPONSES:
        instructions = body.get("instructions")
        return {**body, "instructions": f"{prompt}\n\n{instructions}" if instructions else prompt}
    messages = list(body.get("messages") or [])
    first = messages[0] if messages else None
    # Many chat templates accept a single leading system message, so merge into one when the client sent one.
    if first is not None and first.get("role") in ("system", "developer") and isinstance(first.get("content"), str):
        messages[0] = {**first, "content": f"{prompt}\n\n{first['content']}"}
    else:
        messages.insert(0, {"role": "system", "content": prompt})
    return {**body, "messages": messages}
