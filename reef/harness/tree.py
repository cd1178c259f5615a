"""The harness tree: an ordered list of typed nodes, stored in a release as `harness.json`.

A node is `{id, kind, config}`. The kinds and the config each carries:
- `rules`: `{text}` — standing instructions;
- `skill`: `{name, description, text}` — a named procedure the agent may load;
- `command`: `{name, description, text}` — a prompt template the user or agent invokes by name;
- `memory`: `{text, tags?}` — a lesson or worked example from earlier episodes;
- `config`: `{settings: {...}}` — agent settings, merged in order (never an endpoint, key or model; only keys an
  adapter declares it renders);
- `extension`: `{name, text, language?}` — agent-specific code (e.g. a pi extension).

`rules`, `skill` and `memory` are text; `extension`, `command` and a config node holding an executable settings key
are executable nodes (`reef.harness.admission.is_executable`), held for review.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import orjson

from reef.core.errors import BadRequest

NodeKind = Literal["rules", "skill", "command", "memory", "config", "extension"]
KINDS: tuple[str, ...] = ("rules", "skill", "command", "memory", "config", "extension")
TREE_FILE = "harness.json"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """One harness node; `config` is JSON-able and shaped by `kind` (see the module docstring)."""

    id: str
    kind: NodeKind
    config: dict[str, Any]

    @property
    def text(self) -> str:
        return str(self.config.get("text", ""))

    @property
    def name(self) -> str:
        return str(self.config.get("name", self.id))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "config": self.config}


@dataclasses.dataclass(frozen=True, slots=True)
class HarnessTree:
    """An ordered tuple of nodes with unique ids (order is rendering order)."""

    nodes: tuple[Node, ...] = ()

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, node_id: str) -> Node | None:
        return next((node for node in self.nodes if node.id == node_id), None)

    def of_kind(self, kind: str) -> list[Node]:
        return [node for node in self.nodes if node.kind == kind]

    def ids(self) -> list[str]:
        return [node.id for node in self.nodes]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "nodes": [node.to_json() for node in self.nodes]}

    def dumps(self) -> str:
        return orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> HarnessTree:
        return cls(tuple(nodes))


def node_from_json(raw: Any, field: str = "node") -> Node:
    """A node from its JSON form, shape-checked only (admission checks the content)."""
    if not isinstance(raw, dict):
        raise BadRequest("a node must be an object {id, kind, config}", field=field)
    unknown = set(raw) - {"id", "kind", "config"}
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)}", field=field)
    node_id, kind, config = raw.get("id"), raw.get("kind"), raw.get("config", {})
    if not isinstance(node_id, str):
        raise BadRequest("must be a string", field=f"{field}.id")
    if kind not in KINDS:
        raise BadRequest(f"must be one of {', '.join(KINDS)}", field=f"{field}.kind")
    if not isinstance(config, dict):
        raise BadRequest("must be a JSON object", field=f"{field}.config")
    return Node(id=node_id, kind=kind, config=config)


def tree_from_json(raw: Any) -> HarnessTree:
    """A tree from `{"nodes": [...]}` (or a bare list of nodes)."""
    nodes_raw = raw.get("nodes") if isinstance(raw, dict) else raw
    if not isinstance(nodes_raw, list):
        raise BadRequest("a harness tree needs a `nodes` list", field="nodes")
    return HarnessTree.of(node_from_json(item, f"nodes[{i}]") for i, item in enumerate(nodes_raw))


def load_tree(directory: Path) -> HarnessTree:
    """The tree stored in a release directory (an empty tree when the release holds none)."""
    path = Path(directory) / TREE_FILE
    if not path.is_file():
        return HarnessTree()
    return tree_from_json(orjson.loads(path.read_bytes()))
