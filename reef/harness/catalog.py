"""The adapter catalog: declarative JSON files (package data in `reef/harness/adapters/`) saying how each node
kind renders to files for one agent, where the agent reads them, and how its model is bound at install time.

A file spec is one of:
- `{"path", "sections": [{"kind", "heading"?, "item"}]}`: one file; each section joins the nodes of `kind`;
- `{"path": "dir/{name}/X.md", "each": kind, "template"}`: one file per node of `kind`;
- `{"path", "merge": "config"}`: the `settings` of every config node, merged in order, as JSON.
Templates know `{id}`, `{name}`, `{description}`, `{text}` and `{tags}`.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
from functools import cache
from typing import Any

import orjson

from reef.core.errors import BadRequest
from reef.harness.tree import KINDS

BINDINGS = ("pi", "claude", "openai-env", "env")


@dataclasses.dataclass(frozen=True, slots=True)
class Adapter:
    """How one agent reads a harness: file specs, install directory (a shell expression) and binding kind."""

    name: str
    description: str
    files: tuple[dict[str, Any], ...]
    install_dir: str
    binding: str
    requires: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "files": [spec["path"] for spec in self.files],
            "install_dir": self.install_dir,
            "requires": self.requires,
        }


def adapter_names() -> list[str]:
    """Every adapter shipped with Reef, sorted."""
    root = importlib.resources.files("reef.harness.adapters")
    return sorted(entry.name[: -len(".json")] for entry in root.iterdir() if entry.name.endswith(".json"))


@cache
def load_adapter(name: str) -> Adapter:
    """The adapter called `name`; raises BadRequest naming `adapter` if there is none."""
    if name not in adapter_names():
        raise BadRequest(f"unknown adapter {name!r}; known: {', '.join(adapter_names())}", field="adapter")
    raw = orjson.loads(importlib.resources.files("reef.harness.adapters").joinpath(f"{name}.json").read_bytes())
    return parse_adapter(raw)


def parse_adapter(raw: dict[str, Any]) -> Adapter:
    """Check an adapter definition (shipped files are checked by a test, so a typo fails CI, not a request)."""
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        raise ValueError("an adapter needs `files`")
    for spec in files:
        modes = [key for key in ("sections", "each", "merge") if key in spec]
        if "path" not in spec or len(modes) != 1:
            raise ValueError(f"a file spec needs `path` and one of sections/each/merge: {spec}")
        kinds = [s["kind"] for s in spec.get("sections", [])] + [spec.get("each", "rules")]
        if any(kind not in KINDS for kind in kinds):
            raise ValueError(f"unknown kind in {spec}")
    install = raw["install"]
    if install["binding"] not in BINDINGS:
        raise ValueError(f"unknown binding {install['binding']!r}")
    return Adapter(
        name=raw["name"],
        description=raw["description"],
        files=tuple(files),
        install_dir=install["dir"],
        binding=install["binding"],
        requires=raw.get("requires", {}),
    )
