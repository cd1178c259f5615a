"""Mutations of a harness tree: create, update, remove — applied all together or not at all.

Wire form (proposals, proposer output, commit metrics):
`{"op": "create", "node": {id, kind, config}, "after"?: id}`, `{"op": "update", "id": ..., "config": {...}}`
(a merge into the node's config; `null` values delete keys), `{"op": "remove", "id": ...}`.
The reference client's form is accepted too: `{"op": "create"|"update"|"remove", "id", "options"}`, where a
create's `options` are the new node's config plus its `kind` (default `rules`) and an update's are the patch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from reef.core.errors import BadRequest
from reef.harness.admission import admit_tree
from reef.harness.tree import HarnessTree, Node, node_from_json

Op = Literal["create", "update", "remove"]
MAX_MUTATIONS = 100


@dataclasses.dataclass(frozen=True, slots=True)
class Mutation:
    """One change to a tree: `node` for create, `node_id` + `config` patch for update, `node_id` for remove."""

    op: Op
    node_id: str
    node: Node | None = None
    config: dict[str, Any] | None = None
    after: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.op == "create":
            assert self.node is not None
            out: dict[str, Any] = {"op": "create", "node": self.node.to_json()}
            if self.after:
                out["after"] = self.after
            return out
        if self.op == "update":
            return {"op": "update", "id": self.node_id, "config": self.config or {}}
        return {"op": "remove", "id": self.node_id}

    @classmethod
    def create(cls, node: Node, after: str | None = None) -> Mutation:
        return cls("create", node.id, node=node, after=after)

    @classmethod
    def update(cls, node_id: str, config: dict[str, Any]) -> Mutation:
        return cls("update", node_id, config=config)

    @classmethod
    def remove(cls, node_id: str) -> Mutation:
        return cls("remove", node_id)


def parse_mutations(raw: Any, field: str = "mutations") -> list[Mutation]:
    """Validate the wire form of a list of mutations (shape only; `apply_mutations` admits the result)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("must be a non-empty list", field=field)
    if len(raw) > MAX_MUTATIONS:
        raise BadRequest(f"at most {MAX_MUTATIONS} mutations", field=field)
    return [parse_mutation(item, f"{field}[{i}]") for i, item in enumerate(raw)]


def parse_mutation(raw: Any, field: str) -> Mutation:
    if not isinstance(raw, dict):
        raise BadRequest("a mutation must be an object", field=field)
    op = raw.get("op")
    if "options" in raw:
        return _parse_reference(raw, field)
    allowed = {"create": {"op", "node", "after"}, "update": {"op", "id", "config"}, "remove": {"op", "id"}}
    if op not in allowed:
        raise BadRequest("must be create, update or remove", field=f"{field}.op")
    unknown = set(raw) - allowed[op]
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)}", field=field)
    if op == "create":
        node = node_from_json(raw.get("node"), f"{field}.node")
        after = raw.get("after")
        if after is not None and not isinstance(after, str):
            raise BadRequest("must be a node id", field=f"{field}.after")
        return Mutation.create(node, after)
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise BadRequest("must be a node id", field=f"{field}.id")
    if op == "remove":
        return Mutation.remove(node_id)
    config = raw.get("config")
    if not isinstance(config, dict) or not config:
        raise BadRequest("must be a non-empty object (merged into the node's config)", field=f"{field}.config")
    return Mutation.update(node_id, config)


def _parse_reference(raw: dict[str, Any], field: str) -> Mutation:
    """The reference's `{op, id, options}` as a mutation."""
    op, node_id, options = raw.get("op"), raw.get("id"), raw.get("options")
    if op not in ("create", "update", "remove"):
        raise BadRequest("must be create, update or remove", field=f"{field}.op")
    unknown = set(raw) - {"op", "id", "options"}
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)}", field=field)
    if not isinstance(node_id, str) or not node_id:
        raise BadRequest("must be a node id", field=f"{field}.id")
    if not isinstance(options, dict):
        raise BadRequest("must be an object", field=f"{field}.options")
    if op == "remove":
        return Mutation.remove(node_id)
    if op == "update":
        if not options:
            raise BadRequest("must be a non-empty object (merged into the node's config)", field=f"{field}.options")
        return Mutation.update(node_id, dict(options))
    config = {key: value for key, value in options.items() if key != "kind"}
    node = node_from_json({"id": node_id, "kind": options.get("kind", "rules"), "config": config}, f"{field}.options")
    return Mutation.create(node)


def apply_mutations(tree: HarnessTree, mutations: Sequence[Mutation]) -> HarnessTree:
    """The tree after every mutation, admitted; raises BadRequest (and changes nothing) if any one fails."""
    nodes = list(tree.nodes)
    for i, mutation in enumerate(mutations):
        where = f"mutations[{i}]"
        index = next((j for j, node in enumerate(nodes) if node.id == mutation.node_id), None)
        if mutation.op == "create":
            assert mutation.node is not None
            if index is not None:
                raise BadRequest(f"node {mutation.node_id!r} already exists", field=f"{where}.node.id")
            position = len(nodes)
            if mutation.after is not None:
                anchor = next((j for j, node in enumerate(nodes) if node.id == mutation.after), None)
                if anchor is None:
                    raise BadRequest(f"no node {mutation.after!r}", field=f"{where}.after")
                position = anchor + 1
            nodes.insert(position, mutation.node)
            continue
        if index is None:
            raise BadRequest(f"no node {mutation.node_id!r}", field=f"{where}.id")
        if mutation.op == "remove":
            del nodes[index]
            continue
        merged = dict(nodes[index].config)
        for key, value in (mutation.config or {}).items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        nodes[index] = dataclasses.replace(nodes[index], config=merged)
    try:
        return admit_tree(HarnessTree.of(nodes))
    except BadRequest as exc:
        raise BadRequest(exc.message, field=None)


def diff_trees(before: HarnessTree, after: HarnessTree) -> list[Mutation]:
    """The mutations that turn `before` into `after` (for commit metrics and the replay page)."""
    changes: list[Mutation] = []
    after_ids = set(after.ids())
    for node in before:
        if node.id not in after_ids:
            changes.append(Mutation.remove(node.id))
    for node in after:
        old = before.get(node.id)
        if old is None:
            changes.append(Mutation.create(node))
        elif old.config != node.config or old.kind != node.kind:
            patch = {k: v for k, v in node.config.items() if old.config.get(k) != v}
            patch.update({k: None for k in old.config if k not in node.config})
            changes.append(Mutation.update(node.id, patch))
    return changes


def coerce_mutations(raw: Any, id_prefix: str = "node") -> list[Mutation]:
    """Best-effort mutations from a model's parsed JSON: well-formed ones, bare nodes, or strings as rules.

    Anything unusable is dropped; admission still checks whatever survives.
    """
    import hashlib

    if isinstance(raw, dict):
        raw = raw.get("mutations", raw.get("nodes", [raw]))
    if not isinstance(raw, list):
        return []
    found: list[Mutation] = []
    for i, item in enumerate(raw[:MAX_MUTATIONS]):
        try:
            if isinstance(item, dict) and "op" in item:
                found.append(parse_mutation(item, f"mutations[{i}]"))
                continue
            if isinstance(item, str):
                item = {"kind": "rules", "text": item}
            if not isinstance(item, dict):
                continue
            kind = item.get("kind", "rules")
            given = item.get("config")
            config: dict[str, Any] = (
                given if isinstance(given, dict) else {k: v for k, v in item.items() if k not in ("id", "kind", "op")}
            )
            if not isinstance(config.get("text"), str) and kind != "config":
                continue
            digest = hashlib.sha256(json_text(config).encode()).hexdigest()[:10]
            node_id = item.get("id") if isinstance(item.get("id"), str) else f"{id_prefix}-{digest}"
            found.append(Mutation.create(node_from_json({"id": node_id, "kind": kind, "config": config})))
        except BadRequest:
            continue
    return found


def json_text(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)
