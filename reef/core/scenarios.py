"""Scenario names and the wire dialects."""

from __future__ import annotations

import enum
import re

from reef.core.errors import BadRequest

_SCENARIO_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def validate_scenario_name(name: str | None, field: str = "x-reef-scenario") -> str:
    """Return `name` if it is a valid scenario name (1-128 chars of `[A-Za-z0-9._:-]`, not `.` or `..`), else raise
    BadRequest."""
    if not name:
        raise BadRequest("a scenario name is required", field=field)
    if not _SCENARIO_NAME.fullmatch(name):
        raise BadRequest("must be 1-128 characters of A-Z a-z 0-9 . _ : -", field=field)
    if name in (".", ".."):  # a scenario name becomes a directory or file name
        raise BadRequest(f"{name!r} is not a name", field=field)
    return name


class Dialect(enum.StrEnum):
    """The three provider wire formats Reef speaks."""

    CHAT = "chat"  # OpenAI /v1/chat/completions
    RESPONSES = "responses"  # OpenAI /v1/responses
    MESSAGES = "messages"  # Anthropic /v1/messages
