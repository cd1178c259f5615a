"""The adapter catalog: declarative JSON files (package data in `reef/harness/adapters/`) saying how each node
kind renders to files for one agent, where the agent reads them, and how its model is bound at install time.

A file spec is one of:
- `{"path", "sections": [{"kind", "heading"?, "item"}]}`: one file; each section joins the nodes of `kind`;
- `{"path": "dir/{name}/X.md", "each": kind, "front_matter"?: {key: template}, "template"}`: one file per node of
  `kind`; a front matter is written as YAML between `---` lines (by a YAML writer, so a value stays one value);
- `{"path", "merge": "config"}`: the `settings` of every config node, merged in order, as JSON.
Templates know `{id}`, `{name}`, `{description}`, `{text}` and `{tags}`.

Every adapter also declares `"settings": {"keys": [...], "executable": [...]}`: the settings keys its merge file
renders (a dotted key such as `permissions.deny` admits only that member of an object). `executable` keys are
rendered too, but they run a command, load a plugin or MCP server, set the environment or widen permissions: a
config node holding one is an executable node, held for review like an extension. A key no adapter renders is
refused at admission.
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

SettingsPath = tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SettingsReading:
    """What one adapter makes of a `settings` object: what it renders, what it does not know, what is executable."""

    rendered: dict[str, Any]
    unknown: list[SettingsPath]
    executable: list[SettingsPath]


@dataclasses.dataclass(frozen=True, slots=True)
class Adapter:
    """How one agent reads a harness: file specs, install directory (a shell expression) and binding kind."""

    name: str
    description: str
    files: tuple[dict[str, Any], ...]
    install_dir: str
    binding: str
    requires: dict[str, Any]
    settings_keys: frozenset[SettingsPath] = frozenset()
    executable_keys: frozenset[SettingsPath] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "files": [spec["path"] for spec in self.files],
            "install_dir": self.install_dir,
            "requires": self.requires,
        }

    def read_settings(self, settings: dict[str, Any]) -> SettingsReading:
        """Split `settings` by this adapter's allow-list: the part it renders, the paths it does not render, and the
        rendered paths that make a node executable."""
        reading = SettingsReading({}, [], [])
        self._read(settings, (), reading.rendered, reading)
        return reading

    def _read(self, value: dict[str, Any], prefix: SettingsPath, out: dict[str, Any], reading: SettingsReading) -> None:
        declared = self.settings_keys | self.executable_keys
        for key, item in value.items():
            path = (*prefix, str(key))
            narrowed = any(len(entry) > len(path) and entry[: len(path)] == path for entry in declared)
            if narrowed and isinstance(item, dict):
                inner: dict[str, Any] = {}
                self._read(item, path, inner, reading)
                if inner or not item:
                    out[key] = inner
            elif path in declared and not narrowed:
                out[key] = item
                if path in self.executable_keys:
                    reading.executable.append(path)
            else:
                reading.unknown.append(path)


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
        matter = spec.get("front_matter", {})
        if (
            not isinstance(matter, dict)
            or not all(isinstance(v, str) for v in matter.values())
            or (matter and "each" not in spec)
        ):
            raise ValueError(f"a front matter maps keys to templates, in an `each` spec: {spec}")
    install = raw["install"]
    if install["binding"] not in BINDINGS:
        raise ValueError(f"unknown binding {install['binding']!r}")
    keys, executable = _settings_keys(raw.get("settings"))
    if (keys or executable) and not any("merge" in spec for spec in files):
        raise ValueError("an adapter without a settings file renders no settings keys")
    return Adapter(
        name=raw["name"],
        description=raw["description"],
        files=tuple(files),
        install_dir=install["dir"],
        binding=install["binding"],
        requires=raw.get("requires", {}),
        settings_keys=keys,
        executable_keys=executable,
    )


def _settings_keys(raw: Any) -> tuple[frozenset[SettingsPath], frozenset[SettingsPath]]:
    """The `settings` declaration: (rendered keys, executable keys) as paths; both lists are required."""
    if not isinstance(raw, dict) or set(raw) != {"keys", "executable"}:
        raise ValueError('an adapter declares `"settings": {"keys": [...], "executable": [...]}`')
    found = []
    for name in ("keys", "executable"):
        entries = raw[name]
        if not isinstance(entries, list) or not all(
            isinstance(e, str) and e and "" not in e.split(".") for e in entries
        ):
            raise ValueError(f"settings.{name} must be a list of dotted keys")
        found.append(frozenset(tuple(entry.split(".")) for entry in entries))
    keys, executable = found
    if keys & executable:
        raise ValueError(f"settings keys listed twice: {sorted('.'.join(p) for p in keys & executable)}")
    return keys, executable
