"""Reading Reef's request headers and bodies: scenario, tags, release pin, JSON objects."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request

from reef.core.errors import BadRequest, NotFound
from reef.core.records import MAX_SESSION_TAG_CHARS
from reef.core.scenarios import validate_scenario_name
from reef.service.state import ServiceState, runtime_of

TAG_PREFIX = "x-reef-tag-"


def scenario_of(request: Request) -> str:
    """The `x-reef-scenario` header, validated (400 when missing, empty or malformed)."""
    return validate_scenario_name(request.headers.get("x-reef-scenario"))


def tags_of(request: Request) -> dict[str, str]:
    """Free-form `x-reef-tag-<name>` headers as `{name: value}`; a `session` tag over 128 characters is a 400."""
    tags = {
        name[len(TAG_PREFIX) :]: value
        for name, value in request.headers.items()
        if name.startswith(TAG_PREFIX) and len(name) > len(TAG_PREFIX)
    }
    if len(tags.get("session", "")) > MAX_SESSION_TAG_CHARS:
        raise BadRequest(f"at most {MAX_SESSION_TAG_CHARS} characters", field="x-reef-tag-session")
    return tags


def release_pin_of(request: Request) -> str | None:
    """A release the client pins with `x-reef-release-id` (or the legacy `x-reef-artifact-version`)."""
    return request.headers.get("x-reef-release-id") or request.headers.get("x-reef-artifact-version") or None


async def json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 that says why not."""
    raw = await request.body()
    if not raw:
        raise BadRequest("a JSON object is required", field="body")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"not valid JSON ({exc})", field="body")
    if not isinstance(body, dict):
        raise BadRequest("must be a JSON object", field="body")
    return body


async def live_scenario(state: ServiceState, name: str) -> str:
    """Make sure `name` exists, creating it (bound to the deployment's recipe) unless implicit creation is off."""
    runtime = state.runtime
    if runtime.known_scenario(name):
        return name
    if not state.settings.reef.implicit_scenarios:
        raise NotFound(f"unknown scenario {name!r} (implicit creation is off; POST /reef/scenarios first)")
    await runtime.ensure_scenario(name)
    return name


def existing_scenario(request: Request, name: str) -> str:
    """404 unless the scenario exists (scenario-scoped read routes never create one)."""
    validate_scenario_name(name, field="scenario")
    if not runtime_of(request).known_scenario(name):
        raise NotFound(f"unknown scenario {name!r}")
    return name
