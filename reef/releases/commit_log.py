"""`FileCommitLog`: the learner's step log as append-only JSON lines, one fsync'd file per scenario.

A crash can leave the last line half written (no trailing newline); readers ignore it, and the next append
first cuts it off, so a torn step is never glued to the following one.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from reef.core.releases import Commit
from reef.core.scenarios import validate_scenario_name
from reef.releases.base import CommitLog
from reef.releases.names import encode_name

_TAIL_BLOCK_BYTES = 64 * 1024


class FileCommitLog(CommitLog):
    """`<directory>/<scenario>.jsonl`; an `append` returns only once the line is on disk."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._repaired: set[str] = set()  # scenarios whose torn tail (if any) was cut off by this process

    def path(self, scenario: str) -> Path:
        return self.directory / f"{encode_name(validate_scenario_name(scenario, field='scenario'))}.jsonl"

    def append(self, commit: Commit) -> None:
        path = self.path(commit.scenario)
        line = json.dumps(commit.to_json(), separators=(",", ":"), sort_keys=True).encode() + b"\n"
        with self._lock:
            if commit.scenario not in self._repaired:
                _cut_torn_tail(path)
                self._repaired.add(commit.scenario)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def list(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[Commit]:
        path = self.path(scenario)
        found: list[Commit] = []
        if limit <= 0 or not path.exists():
            return found
        # Lines are written by json.dumps with its default escaping, so a step that consumed `record_id` holds it
        # as this exact JSON string: lines without it are skipped unparsed (a scan of the log, no JSON decoding).
        needle = json.dumps(record_id).encode() if record_id is not None else b""
        with open(path, "rb") as handle:
            for raw in handle:
                if needle not in raw:
                    continue
                commit = _parse(raw)
                if commit is None or commit.step <= after_step:
                    continue
                if record_id is not None and record_id not in commit.consumed_record_ids:
                    continue
                found.append(commit)
                if len(found) >= limit:
                    break
        return found

    def last(self, scenario: str) -> Commit | None:
        path = self.path(scenario)
        if not path.exists():
            return None
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            block = _TAIL_BLOCK_BYTES
            while True:  # read backwards in growing blocks until a whole line parses
                start = max(0, size - block)
                handle.seek(start)
                # The last piece follows the last newline: empty, or a torn line. The first may be partial.
                lines = handle.read(size - start).split(b"\n")[:-1]
                complete = lines[1:] if start > 0 else lines
                for raw in reversed(complete):
                    commit = _parse(raw + b"\n")
                    if commit is not None:
                        return commit
                if start == 0:
                    return None
                block *= 4


def _parse(raw: bytes) -> Commit | None:
    """The commit on one line, or None for a torn (unterminated or unparsable) line."""
    if not raw.endswith(b"\n"):
        return None
    try:
        data: dict[str, Any] = json.loads(raw)
        return Commit.from_json(data)
    except (ValueError, TypeError):
        return None


def _cut_torn_tail(path: Path) -> None:
    """Truncate `path` after its last newline (a crash mid-append leaves a line without one)."""
    if not path.exists():
        return
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        position = size
        while position > 0:
            step = min(_TAIL_BLOCK_BYTES, position)
            handle.seek(position - step)
            newline = handle.read(step).rfind(b"\n")
            if newline >= 0:
                position = position - step + newline + 1
                break
            position -= step
        handle.truncate(position)
        os.fsync(handle.fileno())
