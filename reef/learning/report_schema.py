"""The JSON Schema of a `POST /reef/report` body, and a recipe's additions to it (GET /reef/scenarios/{s}/contract).

The server validates reports itself (the edge's model, then the recipe's `validate_report`); the schema tells a
client in advance what its recipe needs, in a form any JSON Schema validator reads.
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
) -> dict[str, Any]:
    """The report schema with top-level `required` fields, required `metadata` properties (`{name: schema}`), and
    narrower `score` / `feedback` rules. A recipe that skips a report without `references` (it has nothing to
    train on) lists them as required: the server accepts such a report, but it teaches nothing."""
    schema = copy.deepcopy(REPORT_SCHEMA)
    properties = schema["properties"]
    if score:
        properties["score"].update(score)
    if feedback:
        properties["feedback"] = feedback
    if metadata:
        properties["metadata"].update({"properties": metadata, "required": sorted(metadata)})
        required = (*required, "metadata")
    if required:
        schema["required"] = sorted(set(required))
    return schema
