"""What an agent task adds to a gate task row: a workspace the agent starts in and a check run after it.

`workspace`: `{"files": {relative path: text}}` and/or `{"dir": fixture directory}` (copied first, `files` on top).
`check`, run in the episode's root once the agent has finished:
- `{"command": "sh words" | [argv…], "expect_exit": 0, "timeout_s": 30}` passes when the command exits as expected;
- `{"file": relative path, "contains": text}` passes when that file exists and holds the text.
Every path stays inside the root: an absolute path or one with `..` is refused, naming the field.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath
from typing import Any

from reef.core.errors import BadRequest

MAX_WORKSPACE_FILES = 200
MAX_CHECK_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True, slots=True)
class Workspace:
    """The files an agent episode starts with: a fixture directory's copy, then `files` written over it."""

    files: dict[str, str]
    fixture_dir: Path | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AgentCheck:
    """Run after the agent: a command and the exit status it must give, or a file and the text it must hold."""

    command: list[str] | None = None
    expect_exit: int = 0
    timeout_s: float = 30.0
    file: str | None = None
    contains: str | None = None


def inside_root(path: Any, field: str) -> str:
    """`path` as a relative POSIX path that stays inside its root; BadRequest naming `field` otherwise."""
    if not isinstance(path, str) or not path.strip():
        raise BadRequest("must be a non-empty relative path", field=field)
    pure = PurePosixPath(path)
    if "\0" in path or "\\" in path:
        raise BadRequest("must not hold '\\' or NUL", field=field)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or path.startswith("~"):
        raise BadRequest(f"{path!r} escapes the episode root", field=field)
    return pure.as_posix()


def parse_workspace(raw: Any, field: str) -> Workspace:
    if not isinstance(raw, dict) or not raw or set(raw) - {"files", "dir"}:
        raise BadRequest('must be {"files": {path: text}} and/or {"dir": fixture directory}', field=field)
    files_raw = raw.get("files", {})
    if not isinstance(files_raw, dict) or len(files_raw) > MAX_WORKSPACE_FILES:
        raise BadRequest(f"must map at most {MAX_WORKSPACE_FILES} paths to text", field=f"{field}.files")
    files = {}
    for path, text in files_raw.items():
        where = f"{field}.files[{path!r}]"
        if not isinstance(text, str):
            raise BadRequest("must be text", field=where)
        files[inside_root(path, where)] = text
    fixture = raw.get("dir")
    fixture_dir = None
    if fixture is not None:
        if not isinstance(fixture, str) or not Path(fixture).expanduser().is_dir():
            raise BadRequest("must name an existing directory", field=f"{field}.dir")
        fixture_dir = Path(fixture).expanduser().resolve()
    return Workspace(files, fixture_dir)


def parse_check(raw: Any, field: str) -> AgentCheck:
    if not isinstance(raw, dict):
        raise BadRequest('must be {"command", "expect_exit"?} or {"file", "contains"}', field=field)
    if "command" in raw:
        unknown = set(raw) - {"command", "expect_exit", "timeout_s"}
        if unknown:
            raise BadRequest(f"unknown fields {sorted(unknown)}", field=field)
        command = raw["command"]
        if isinstance(command, str) and command.strip():
            argv = ["sh", "-c", command]
        elif isinstance(command, list) and command and all(isinstance(word, str) for word in command):
            argv = list(command)
        else:
            raise BadRequest("must be a shell command string or a non-empty list of strings", field=f"{field}.command")
        expect_exit = raw.get("expect_exit", 0)
        if isinstance(expect_exit, bool) or not isinstance(expect_exit, int):
            raise BadRequest("must be an integer", field=f"{field}.expect_exit")
        timeout_s = raw.get("timeout_s", 30.0)
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 600:
            raise BadRequest(f"must be a number in (0, {MAX_CHECK_TIMEOUT_S:g}]", field=f"{field}.timeout_s")
        return AgentCheck(command=argv, expect_exit=expect_exit, timeout_s=float(timeout_s))
    if "file" in raw:
        unknown = set(raw) - {"file", "contains"}
        if unknown:
            raise BadRequest(f"unknown fields {sorted(unknown)}", field=field)
        contains = raw.get("contains")
        if not isinstance(contains, str):
            raise BadRequest("must be text", field=f"{field}.contains")
        return AgentCheck(file=inside_root(raw["file"], f"{field}.file"), contains=contains)
    raise BadRequest('needs "command" or "file"', field=field)
