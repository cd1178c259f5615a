"""The shape a proposer's reply is decoded under, so that even a small local model's proposal parses.

A harness method asks its proposer for JSON: nodes to add (`evolve`, `gepa`, a directed step), a parent and a
complete composition (`meta_harness`), playbook tips (`ace`) or a titled strategy (`reasoning_bank`). Sent as an
OpenAI `response_format`, the schema is enforced token by token where the engine honours it (the embedded engine,
through llguidance: `reef.inference.local.structured`), so the reply is valid JSON of that shape when it ends; an
endpoint that ignores the field answers as before and its reply is parsed leniently
(`reef.harness.proposer.parse_json_reply`). The bounds keep a complete reply within `reply_max_tokens` (each token
writes at least one character; a string counted at twice its length covers the common escapes), so a reply is not
cut off before its JSON closes.
"""

from __future__ import annotations

from typing import Any

NODE_KINDS = ("rules", "memory")
MAX_TIPS = 3
MAX_TIP_CHARS = 200
MAX_TITLE_CHARS = 60
MAX_STRATEGY_CHARS = 240
MAX_NODES = 3
MAX_NODE_CHARS = 240
MAX_ID_CHARS = 32
# Every character of a reply is at least one token's worth: the longest complete reply, in tokens, with room for
# the JSON around the texts.
_OVERHEAD_CHARS = 48


def _node_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": list(NODE_KINDS)},
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_NODE_CHARS},
        },
        "required": ["kind", "text"],
        "additionalProperties": False,
    }


NODES_SCHEMA: dict[str, Any] = {"type": "array", "minItems": 1, "maxItems": MAX_NODES, "items": _node_schema()}
COMPOSITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "parent": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS},
        "nodes": NODES_SCHEMA,
    },
    "required": ["parent", "nodes"],
    "additionalProperties": False,
}


TIPS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_TIPS,
    "items": {"type": "string", "minLength": 8, "maxLength": MAX_TIP_CHARS},
}
STRATEGY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS},
        "strategy": {"type": "string", "minLength": 12, "maxLength": MAX_STRATEGY_CHARS},
    },
    "required": ["title", "strategy"],
    "additionalProperties": False,
}


def response_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The OpenAI `response_format` that asks for a reply of `schema`'s shape."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def longest_reply_chars(schema: dict[str, Any]) -> int:
    """An upper bound on the characters of a complete reply of `schema` (strings at twice their length)."""
    kind = schema.get("type")
    if kind == "string":
        return 2 * int(schema.get("maxLength", MAX_NODE_CHARS)) + 2
    if kind == "array":
        return 2 + int(schema.get("maxItems", MAX_NODES)) * (longest_reply_chars(schema.get("items", {})) + 1)
    if kind == "object":
        fields = schema.get("properties", {})
        return 2 + sum(len(name) + 4 + longest_reply_chars(spec) for name, spec in fields.items())
    return _OVERHEAD_CHARS


def reply_max_tokens(schema: dict[str, Any], asked: int) -> int:
    """`asked`, raised to what the longest complete reply of `schema` can take, so a reply always closes."""
    return max(asked, longest_reply_chars(schema))


NODES_REPLY = response_format(NODES_SCHEMA, "harness_nodes")
COMPOSITION_REPLY = response_format(COMPOSITION_SCHEMA, "harness_composition")
TIPS_REPLY = response_format(TIPS_SCHEMA, "playbook_tips")
STRATEGY_REPLY = response_format(STRATEGY_SCHEMA, "strategy")
