"""Loading `Settings` in layers: defaults < environment fallbacks < YAML file (`-c`) < dotted flags.

Flags look like `--section.key-name VALUE` (or `=VALUE`); values are read as YAML scalars, so `8900` is a number,
`true` a boolean and `[a, b]` a list. pydantic validates the merged result; an unknown key, a bad type or a
missing value is a `ConfigError` naming the key, which the CLI turns into exit code 2.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from reef.core.settings import Settings

# Environment variables that stand in for a key when neither the file nor a flag sets it.
ENVIRONMENT_FALLBACKS: dict[str, tuple[str, str]] = {
    "REEF_TOKEN": ("reef", "token"),
    "REEF_ADMIN_TOKEN": ("reef", "admin_tokens"),
    "REEF_UPSTREAM_URL": ("inference", "upstream_url"),
    "REEF_UPSTREAM_MODEL": ("inference", "upstream_model"),
    "REEF_UPSTREAM_API_KEY": ("inference", "upstream_api_key"),
    "REEF_DATABASE_URL": ("storage", "record_database_url"),
}


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key."""


def _key_of(flag: str) -> tuple[str, ...]:
    return tuple(part.replace("-", "_") for part in flag.split("."))


def parse_overrides(argv: Sequence[str]) -> dict[tuple[str, ...], Any]:
    """`--a.b-c 1 --d.e=x` → {("a","b_c"): 1, ("d","e"): "x"}; anything else is a ConfigError."""
    overrides: dict[tuple[str, ...], Any] = {}
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        if not item.startswith("--") or "." not in item:
            raise ConfigError(f"unexpected argument {item!r} (settings look like --section.key VALUE)")
        name, sep, value = item[2:].partition("=")
        if not sep:
            if index + 1 >= len(items) or items[index + 1].startswith("--"):
                raise ConfigError(f"--{name}: a value is required")
            value = items[index + 1]
            index += 1
        overrides[_key_of(name)] = _scalar(value)
        index += 1
    return overrides


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text


def _set(tree: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    for part in key[:-1]:
        node = tree.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(key)}: {part} is not a section")
        tree = node
    tree[key[-1]] = value


def _flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    flat: dict[tuple[str, ...], Any] = {}
    for name, value in tree.items():
        key = (*prefix, str(name).replace("-", "_"))
        if isinstance(value, Mapping) and len(key) == 1:
            flat.update(_flatten(value, key))
        else:
            flat[key] = value
    return flat


def load_settings(
    config_file: Path | None = None,
    overrides: Mapping[tuple[str, ...], Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """The resolved settings and, per dotted key that was set, where its value came from."""
    environ = os.environ if environ is None else environ
    layers: list[tuple[str, dict[tuple[str, ...], Any]]] = []
    layers.append(("env", {key: environ[var] for var, key in ENVIRONMENT_FALLBACKS.items() if environ.get(var)}))
    if config_file is not None:
        try:
            loaded = yaml.safe_load(Path(config_file).read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"config file {config_file}: {exc.strerror}")
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {config_file}: not valid YAML ({exc})")
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"config file {config_file}: must be a mapping of sections")
        layers.append((f"file {config_file}", _flatten(loaded)))
    layers.append(("flag", dict(overrides or {})))
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, values in layers:
        for key, value in values.items():
            _set(merged, key, value)
            sources[".".join(key)] = source
    try:
        return Settings.model_validate(merged), sources
    except ValidationError as exc:
        first = exc.errors()[0]
        dotted = ".".join(str(p) for p in first["loc"])
        message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ConfigError(f"{dotted}: {message}")


def describe_settings(settings: Settings, sources: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(dotted key, value with secrets masked, source) for every key, for `--print-config`."""
    rows: list[tuple[str, str, str]] = []

    def walk(model: BaseModel, prefix: str) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            key = f"{prefix}{name}"
            if isinstance(value, BaseModel):
                walk(value, key + ".")
                continue
            rows.append((key.replace("_", "-"), _shown(value), sources.get(key, "default")))

    walk(settings, "")
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "********"
    if isinstance(value, list) and any(isinstance(v, SecretStr) for v in value):
        return "[" + ", ".join("********" for _ in value) + "]"
    return "null" if value is None else str(value)
