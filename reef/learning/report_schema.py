"""The JSON Schema of a `POST /reef/report` body, and a recipe's additions to it (GET /reef/scenarios/{s}/contract).

The server validates reports itself (the edge's model, then the recipe's `validate_report`, which refuses only a
malformed field); the schema tells a client in advance what the server accepts and, in its `description`, what the
recipe trains from, in a form any JSON Schema validator reads.
"""

from __future__ import annotations

import copy
from typing import Any

_RECEIPT = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "POST /reef/report",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number", "description": "finite; booleans are refused"},
        "feedback": {"type": ["string", "object"], "description": "free text or an object the recipe reads"},
        "references": {
            "type": "array",
            "items": {**_RECEIPT, "description": "a receipt (x-reef-agent-record-id) of this scenario's inference"},
            "uniqueItems": True,
        },
        "metadata": {"type": "object", "description": "recipe-specific fields"},
        "agent_record_id": {**_RECEIPT, "description": "the report's own id, for safe retries"},
    },
}


def report_schema(
    *,
    required: tuple[str, ...] = (),
    metadata: dict[str, Any] | None = None,
    score: dict[str, Any] | None = None,
    feedback: dict[str, Any] | None = None,
    trains_from: str | None = None,
) -> dict[str, Any]:
    """The report schema with the shapes of the `metadata` properties a recipe reads (`{name: schema}`), narrower
    `score` / `feedback` rules, top-level `required` fields (a custom recipe's; the built-in ones require nothing)
    and, as the schema's `description`, what the recipe trains from.

    A schema describes what the server accepts. A report lacking what the recipe trains from is well-formed: it is
    stored, and the recipe's processor skips it, counting the reason in `/reef/status` (`skipped`)."""
    schema = copy.deepcopy(REPORT_SCHEMA)
    properties = schema["properties"]
    if trains_from:
        schema["description"] = trains_from
    if score:
        properties["score"].update(score)
    if feedback:
        properties["feedback"] = feedback
    if metadata:
        properties["metadata"]["properties"] = metadata
    if required:
        schema["required"] = sorted(set(required))
    return schema


def with_grid_cell(schema: dict[str, Any], cell: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    """`schema` where a report that claims a grid cell (its metadata names any of `cell`) must be a whole one: every
    `cell` key in its metadata and the top-level `required` fields (a discovery grid is incomplete without them).
    A report that claims no cell is taken as it is, and the recipe skips it."""
    claims = {"anyOf": [{"required": [key]} for key in cell]}
    whole: dict[str, Any] = {"required": list(required), "properties": {"metadata": {"required": list(cell)}}}
    if "references" in required:
        whole["properties"]["references"] = {"minItems": 1}
    schema["if"] = {"properties": {"metadata": claims}, "required": ["metadata"]}
    schema["then"] = whole
    return schema
