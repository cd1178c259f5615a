"""Prepend a harness system prompt to a request in any dialect, ahead of the client's own system prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reef.core.scenarios import Dialect


def with_system_prompt(
    dialect: Dialect, body: dict[str, Any], prompt: str | None, example_turns: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """A copy of `body` (one `check_request` passed) whose system prompt starts with `prompt` and whose conversation
    starts with `example_turns` as earlier user/assistant turns (`body` if neither)."""
    if example_turns:
        body = _with_turns(dialect, body, example_turns)
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


def _with_turns(dialect: Dialect, body: dict[str, Any], turns: Sequence[tuple[str, str]]) -> dict[str, Any]:
    pairs = [(role, text) for question, answer in turns for role, text in (("user", question), ("assistant", answer))]
    if dialect is Dialect.RESPONSES:
        given = body.get("input")
        rest = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        return {**body, "input": [{"role": role, "content": text} for role, text in pairs] + rest}
    messages = list(body.get("messages") or [])
    # Chat: after a leading system/developer message; messages (Anthropic): its system prompt is a separate field.
    at = 1 if dialect is Dialect.CHAT and messages and messages[0].get("role") in ("system", "developer") else 0
    messages[at:at] = [{"role": role, "content": text} for role, text in pairs]
    return {**body, "messages": messages}
