"""Rendering a harness tree into an agent's files: a pure function of (tree, adapter).

Published files never contain an endpoint, key or model; admission keeps them out of the tree and the model
binding is written only at episode or install time (`reef.harness.install`, `reef.harness.episodes`). Structured
text is written by its own writer, never pasted into a template: a front matter by a YAML writer and settings as
JSON, holding only the keys the adapter declares it renders.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import yaml

from reef.core.errors import BadRequest
from reef.harness.catalog import Adapter, load_adapter
from reef.harness.tree import TREE_FILE, HarnessTree, Node

_PLACEHOLDER = re.compile(r"\{(id|name|description|text|tags)\}")


def render(tree: HarnessTree, adapter: Adapter | str) -> dict[str, str]:
    """`{relative path: text}` for every file the adapter makes from `tree` (empty files are left out)."""
    if isinstance(adapter, str):
        adapter = load_adapter(adapter)
    files: dict[str, str] = {}
    for spec in adapter.files:
        if "sections" in spec:
            text = _sections(tree, spec["sections"])
            if text:
                files[spec["path"]] = text
        elif "each" in spec:
            for node in tree.of_kind(spec["each"]):
                files[_fill(spec["path"], node)] = _document(spec, node)
        else:
            settings = adapter.read_settings(merged_settings(tree)).rendered
            if settings:
                files[spec["path"]] = orjson.dumps(settings, option=orjson.OPT_INDENT_2).decode() + "\n"
    return dict(sorted(files.items()))


def merged_settings(tree: HarnessTree) -> dict[str, Any]:
    """The `settings` of every config node, merged in tree order (later nodes win, objects merge deeply)."""
    merged: dict[str, Any] = {}
    for node in tree.of_kind("config"):
        merged = _deep_merge(merged, node.config.get("settings", {}))
    return merged


def write_tree(tree: HarnessTree, directory: Path, extra: dict[str, str] | None = None) -> None:
    """Write `harness.json` (plus `extra` files, e.g. a recipe's state) into a release content directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TREE_FILE).write_text(tree.dumps(), encoding="utf-8")
    for relative, text in (extra or {}).items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def write_files(files: dict[str, str], root: Path) -> None:
    """Write rendered files under `root` (an episode's or installer's agent directory)."""
    for relative, text in files.items():
        path = Path(root) / relative
        # Node names are checked on admission; a tree from elsewhere must still not write outside `root`.
        if "\0" in relative or not path.resolve().is_relative_to(Path(root).resolve()):
            raise BadRequest(f"{relative!r} escapes the agent directory", field="nodes.config.name")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _sections(tree: HarnessTree, sections: list[dict[str, Any]]) -> str:
    blocks = []
    for section in sections:
        bulleted = section["item"].startswith("- ")
        items = [_fill(section["item"], node).strip() for node in tree.of_kind(section["kind"])]
        # A multi-line bullet keeps its continuation lines inside the list item.
        items = [item.replace("\n", "\n  ") if bulleted else item for item in items if item]
        if not items:
            continue
        separator = "\n" if bulleted else "\n\n"
        body = separator.join(items)
        blocks.append(f"{section['heading']}\n\n{body}" if section.get("heading") else body)
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _document(spec: dict[str, Any], node: Node) -> str:
    """One file of an `each` spec: its front matter (YAML, one value per key whatever the text holds), then its
    template."""
    body = _fill(spec["template"], node)
    matter = spec.get("front_matter")
    if not matter:
        return body
    fields = {key: _fill(template, node) for key, template in matter.items()}
    dumped = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 30)
    return f"---\n{dumped}---\n{body}"


def _fill(template: str, node: Node) -> str:
    values = {
        "id": node.id,
        "name": node.name,
        "description": str(node.config.get("description", "")),
        "text": node.text.strip(),
        "tags": ", ".join(node.config.get("tags", [])),
    }
    # One pass, so a `{name}` inside a node's text stays literal.
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
