"""The OpenAPI schema of a harness proposal (`POST /reef/harness/proposals`), rule for rule what
`check_proposal`, `parse_mutations` and node admission check.

What a schema cannot say is in the descriptions: text that looks like a credential or binds an endpoint is
refused, an `update` or `remove` must name a node of the tree, and a `create` must not reuse an id or a name.
"""

from __future__ import annotations

from typing import Any

from reef.core.identifiers import RELEASE_ID_PATTERN
from reef.harness.admission import MAX_TEXT_CHARS, SAFE_NAME
from reef.harness.mutations import MAX_MUTATIONS
from reef.harness.published import MAX_REASON_CHARS
from reef.harness.tree import KINDS

_Schema = dict[str, Any]

_SAFE_NAME: _Schema = {"type": "string", "pattern": f"^{SAFE_NAME.pattern}$"}
_TEXT: _Schema = {"type": "string", "pattern": r"\S", "maxLength": MAX_TEXT_CHARS}
_NODE_ID: _Schema = {"type": "string", "minLength": 1}
_NEEDED: dict[str, list[str]] = {
    "rules": ["text"],
    "memory": ["text"],
    "skill": ["name", "text"],
    "command": ["name", "text"],
    "extension": ["name", "text"],
    "config": ["settings"],
}


def _config_of(kind: str) -> _Schema:
    properties: dict[str, _Schema] = {"text": _TEXT, "name": _SAFE_NAME, "description": {"type": "string"}}
    if kind == "memory":
        properties["tags"] = {"type": "array", "items": {"type": "string"}}
    if kind == "config":
        properties = {"settings": {"type": "object", "description": "no endpoints, hosts or secrets"}}
    return {"type": "object", "required": _NEEDED[kind], "properties": properties}


NODE_SCHEMA: _Schema = {
    "type": "object",
    "required": ["id", "kind", "config"],
    "additionalProperties": False,
    "description": "a harness node; its text may hold no credential-shaped literal",
    "properties": {"id": _SAFE_NAME, "kind": {"enum": list(KINDS)}, "config": {"type": "object"}},
    "allOf": [
        {"if": {"properties": {"kind": {"const": kind}}}, "then": {"properties": {"config": _config_of(kind)}}}
        for kind in KINDS
    ],
}


def _mutation(op: str, required: list[str], properties: dict[str, _Schema]) -> _Schema:
    return {
        "type": "object",
        "required": ["op", *required],
        "additionalProperties": False,
        "properties": {"op": {"const": op}, **properties},
    }


MUTATION_SCHEMA: _Schema = {
    "anyOf": [
        _mutation("create", ["node"], {"node": NODE_SCHEMA, "after": {"type": ["string", "null"]}}),
        _mutation("update", ["id", "config"], {"id": _NODE_ID, "config": {"type": "object", "minProperties": 1}}),
        _mutation("remove", ["id"], {"id": _NODE_ID}),
        {
            "type": "object",
            "description": "the reference client's form: `options` is the new node's config (`kind` among them) "
            "or the config merged into the node",
            "required": ["op", "id", "options"],
            "additionalProperties": False,
            "properties": {
                "op": {"enum": ["create", "update", "remove"]},
                "id": _NODE_ID,
                "options": {"type": "object"},
            },
        },
    ],
    "description": "`update` and `remove` name a node of the tree; `create` adds one after `after` (or at the end)",
}
PROPOSAL_SCHEMA: _Schema = {
    "type": "object",
    "required": ["mutations"],
    "additionalProperties": False,
    "properties": {
        "mutations": {"type": "array", "minItems": 1, "maxItems": MAX_MUTATIONS, "items": MUTATION_SCHEMA},
        "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
        "session": {"type": ["string", "null"], "description": "the agent session it comes from"},
        "release_id": {
            "anyOf": [{"type": "string", "pattern": RELEASE_ID_PATTERN}, {"type": "null"}],
            "description": "the release the mutations apply to (default: the serving one)",
        },
    },
}
