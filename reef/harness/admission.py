"""Admission: every node entering a harness tree is checked here, whoever proposed it.

A node must have a safe id (it may become a path), the fields its kind needs, JSON-able config, and nothing that
looks like a credential or a model binding: published trees travel to agents and into git, so a key pasted into a
rule by a proposer (or an agent) must be refused before it is stored, not scrubbed after. Fields rendered on one
line (a skill's name and description, a memory's tags) hold no line break, so they cannot add lines to a front
matter; a config node holds only settings keys some adapter renders (`reef/harness/adapters/*.json`).

Executable nodes are the ones that run or permit things: `extension` and `command` nodes, and config nodes holding
a settings key an adapter declares executable (hooks, MCP servers, plugins, the environment, wider permissions).
Whoever creates or changes one, it is held for review and gated only inside the sandbox.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from typing import Any

import orjson

from reef.core.errors import BadRequest
from reef.harness.catalog import Adapter, SettingsPath, adapter_names, load_adapter
from reef.harness.tree import HarnessTree, Node

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_TEXT_CHARS = 32_000
MAX_NODES = 500
EXECUTABLE_KINDS = ("extension", "command")
SINGLE_LINE_FIELDS = ("name", "description", "language")

# Literals shaped like provider credentials.
_KEY_LITERALS = re.compile(
    r"""
    \bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}      # OpenAI / Anthropic
    | \bAKIA[0-9A-Z]{16}\b                      # AWS access key id
    | \bgh[pousr]_[A-Za-z0-9]{30,}              # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{30,}
    | \bxox[abprs]-[A-Za-z0-9-]{10,}            # Slack
    | \bAIza[0-9A-Za-z_-]{35}                   # Google API key
    | -----BEGIN\ [A-Z ]*PRIVATE\ KEY-----
    | \bBearer\s+[A-Za-z0-9._~+/-]{20,}=*
    """,
    re.VERBOSE,
)
# `key = <long opaque token>` and friends, in prose, env files, JSON or YAML.
_ASSIGNED_SECRET = re.compile(
    r"""(?ix)
    (?:api[_-]?key|access[_-]?key|secret|token|password|passwd|auth|credential)s?["']?\s*[:=]\s*["']?
    ([A-Za-z0-9+/_.=-]{20,})
    """
)
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_SECRET_KEY_PARTS = ("secret", "password", "passwd", "apikey", "credential", "privatekey", "accesskey")
_BINDING_KEYS = frozenset({"baseurl", "apibase", "apiurl", "endpoint", "host", "authorization"})


def admit_tree(tree: HarnessTree) -> HarnessTree:
    """Return `tree` if every node is admissible and ids are unique; raise BadRequest naming the node."""
    if len(tree) > MAX_NODES:
        raise BadRequest(f"a harness holds at most {MAX_NODES} nodes", field="nodes")
    seen: set[str] = set()
    for node in tree:
        admit_node(node)
        if node.id in seen:
            raise BadRequest("duplicate node id", field=f"nodes.{node.id}")
        seen.add(node.id)
    _unique_names(tree)
    return tree


def admit_node(node: Node) -> Node:
    """Return `node` if admissible; raise BadRequest naming the field otherwise."""
    where = f"nodes.{node.id}" if SAFE_NAME.fullmatch(node.id or "") else "nodes.id"
    if not SAFE_NAME.fullmatch(node.id or ""):
        raise BadRequest("an id is 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit", field=where)
    try:
        encoded = orjson.dumps(node.config)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise BadRequest(f"config must be JSON ({exc})", field=f"{where}.config")
    if not _finite(node.config) or not encoded:
        raise BadRequest("config numbers must be finite", field=f"{where}.config")
    _require_fields(node, where)
    for path, value in _strings(node.config, f"{where}.config"):
        refuse_credentials(value, path)
    for path, key, value in _keys(node.config, f"{where}.config"):
        _refuse_secret_key(key, value, path, binding=node.kind == "config")
    if node.kind == "config":
        unknown = unrendered_settings(node.config["settings"])
        if unknown:
            raise BadRequest(
                "no adapter renders this settings key (see each adapter's `settings` allow-list)",
                field=f"{where}.config.settings.{unknown[0]}",
            )
    return node


def is_executable(node: Node) -> bool:
    """Whether `node` runs or permits things (an extension, a command, or a config node holding an executable
    settings key): such a node is held for review and gated only inside the sandbox."""
    if node.kind in EXECUTABLE_KINDS:
        return True
    settings = node.config.get("settings") if node.kind == "config" else None
    return isinstance(settings, dict) and bool(executable_settings(settings))


def executable_settings(settings: dict[str, Any]) -> list[str]:
    """The dotted settings keys in `settings` that some adapter renders as executable (hooks, MCP servers, ...)."""
    found: dict[SettingsPath, None] = {}
    for adapter in _adapters():
        found.update(dict.fromkeys(adapter.read_settings(settings).executable))
    return [".".join(path) for path in found]


def unrendered_settings(settings: dict[str, Any]) -> list[str]:
    """The dotted settings keys in `settings` that no adapter renders (refused at admission)."""
    readings = [set(adapter.read_settings(settings).unknown) for adapter in _adapters()]
    if not readings:
        return [str(key) for key in settings]
    candidates = dict.fromkeys(path for unknown in readings for path in unknown)

    def nobody_renders(path: SettingsPath) -> bool:
        return all(any(path[:i] in unknown for i in range(1, len(path) + 1)) for unknown in readings)

    return [".".join(path) for path in candidates if nobody_renders(path)]


@cache
def _adapters() -> tuple[Adapter, ...]:
    return tuple(load_adapter(name) for name in adapter_names())


def refuse_credentials(text: str, field: str) -> None:
    """Raise BadRequest if `text` holds a literal that looks like a credential (the tripwire)."""
    if _KEY_LITERALS.search(text):
        raise BadRequest("refused: the text contains a credential-shaped literal", field=field)
    for match in _ASSIGNED_SECRET.finditer(text):
        if _opaque(match.group(1)):
            raise BadRequest("refused: the text assigns a token-shaped value to a key/token/secret", field=field)


def _opaque(value: str) -> bool:
    """Long hex, or base64-ish with both letters and digits: what generated secrets look like (not words)."""
    if _HEX.fullmatch(value):
        return True
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and len(value) >= 20 and not value.isalpha()


def _require_fields(node: Node, where: str) -> None:
    config = node.config
    needed = {
        "rules": ("text",),
        "memory": ("text",),
        "skill": ("name", "text"),
        "command": ("name", "text"),
        "extension": ("name", "text"),
        "config": (),
    }[node.kind]
    for field in needed:
        value = config.get(field)
        if not isinstance(value, str) or not value.strip():
            raise BadRequest("must be a non-empty string", field=f"{where}.config.{field}")
        if len(value) > MAX_TEXT_CHARS:
            raise BadRequest(f"at most {MAX_TEXT_CHARS} characters", field=f"{where}.config.{field}")
    if "name" in needed and not SAFE_NAME.fullmatch(config["name"]):
        raise BadRequest("a name is 1-64 characters of A-Z a-z 0-9 . _ -", field=f"{where}.config.name")
    for field in SINGLE_LINE_FIELDS:
        if field in config:
            if not isinstance(config[field], str):
                raise BadRequest("must be a string", field=f"{where}.config.{field}")
            _refuse_line_breaks(config[field], f"{where}.config.{field}")
    if node.kind == "memory" and "tags" in config:
        tags = config["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise BadRequest("must be a list of strings", field=f"{where}.config.tags")
        for i, tag in enumerate(tags):
            _refuse_line_breaks(tag, f"{where}.config.tags[{i}]")
    if node.kind == "config" and not isinstance(config.get("settings"), dict):
        raise BadRequest("a config node needs `settings` (a JSON object)", field=f"{where}.config.settings")


def _refuse_line_breaks(value: str, field: str) -> None:
    """A one-line field (rendered into a front matter or a heading) holds no line break or control character."""
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in value):
        raise BadRequest("must be one line (no line break or control character)", field=field)


def _unique_names(tree: HarnessTree) -> None:
    # Two skills with one name would render to the same file.
    for kind in ("skill", "command", "extension"):
        names: set[str] = set()
        for node in tree.of_kind(kind):
            if node.name in names:
                raise BadRequest(f"two {kind} nodes are named {node.name!r}", field=f"nodes.{node.id}.config.name")
            names.add(node.name)


def _refuse_secret_key(key: str, value: Any, field: str, binding: bool) -> None:
    normalized = re.sub(r"[^a-z0-9]", "", key.lower())
    secret = (
        any(part in normalized for part in _SECRET_KEY_PARTS)
        or normalized in ("token", "auth", "bearer")
        or normalized.endswith("token")
    )
    if secret:
        raise BadRequest("refused: a config key named like a secret", field=field)
    if binding and (normalized in _BINDING_KEYS or normalized.endswith("model") or normalized.endswith("provider")):
        raise BadRequest("refused: the model binding (endpoint, provider, model) is added at install time", field=field)
    if binding and isinstance(value, str) and re.match(r"(?i)https?://", value):
        raise BadRequest("refused: an endpoint URL in settings (bound at install time)", field=field)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield path + "." + str(key), str(key)
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _keys(value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}", str(key), item
            yield from _keys(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _keys(item, f"{path}[{i}]")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True
