"""Gate tasks given through the API (`POST /reef/scenarios/{s}/tasks`), kept per scenario on disk.

`<directory>/<scenario>.jsonl` holds one validated row per line. An addition validates every new row first and
then replaces the file atomically (write a temporary file, fsync, rename, fsync the directory), so a refused
body stores nothing and a crash leaves the old or the new list, never a torn one.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from reef.core.errors import BadRequest
from reef.core.scenarios import validate_scenario_name
from reef.learning.evaluation.tasks import Task, jsonl_rows, parse_task
from reef.releases.names import encode_name

MAX_TASKS = 10_000  # per scenario
MAX_TASK_BYTES = 256 * 1024  # one task's JSON


def parse_tasks_body(body: bytes, max_bytes: int) -> list[tuple[str, dict[str, Any]]]:
    """`(where, row)` for each task of a request body: `{"tasks": [...]}` or JSONL (one task per line).

    `where` names the task in errors (`tasks[3]` or `line 4`); BadRequest for anything malformed.
    """
    if len(body) > max_bytes:
        raise BadRequest(f"the body is {len(body)} bytes, over the limit of {max_bytes}", field="tasks")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"not UTF-8 text ({exc})", field="tasks")
    rows: list[tuple[str, Any]]
    stripped = text.strip()
    if not stripped:
        raise BadRequest('no tasks given (a JSON body {"tasks": [...]} or one JSON task per line)', field="tasks")
    whole: Any = None
    try:
        whole = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        pass  # JSONL with several lines
    if isinstance(whole, dict) and "tasks" in whole:
        extra = sorted(set(whole) - {"tasks"})
        if extra:
            raise BadRequest("unknown field", field=extra[0])
        if not isinstance(whole["tasks"], list) or not whole["tasks"]:
            raise BadRequest("must be a non-empty list of tasks", field="tasks")
        rows = [(f"tasks[{index}]", row) for index, row in enumerate(whole["tasks"])]
    else:
        rows = jsonl_rows(text)
    for where, row in rows:
        if not isinstance(row, dict):
            raise BadRequest("a task must be a JSON object", field=where)
        if len(orjson.dumps(row)) > MAX_TASK_BYTES:
            raise BadRequest(f"a task may take at most {MAX_TASK_BYTES} bytes", field=where)
    return rows


class TaskStore:
    """The API-given gate tasks of every scenario (cached in memory; one writer per process)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[list[dict[str, Any]], list[Task]]] = {}  # scenario -> (rows, their tasks)

    def rows(self, scenario: str) -> list[dict[str, Any]]:
        """The stored rows of `scenario`, in the order they were added."""
        with self._lock:
            return list(self._load(scenario)[0])

    def tasks(self, scenario: str) -> list[Task]:
        """The stored tasks of `scenario` as gate tasks (parsed once per change)."""
        with self._lock:
            return list(self._load(scenario)[1])

    def add(self, scenario: str, rows: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Validate `rows` (`(where, row)`, as `parse_tasks_body` gives them) and append them; returns the stored rows
        (each with its `id` and `added_at`, when it was added: the retention set reads it). Nothing is stored unless
        every row is valid and every id is new."""
        with self._lock:
            existing = self._load(scenario)[0]
            now = time.time()
            ids = {str(row["id"]) for row in existing}
            if len(existing) + len(rows) > MAX_TASKS:
                raise BadRequest(f"a scenario holds at most {MAX_TASKS} tasks ({len(existing)} stored)", field="tasks")
            added = []
            for where, row in rows:
                parse_task(row, where)
                row_id = str(row["id"]) if "id" in row else self._next_id(ids)
                if row_id in ids:
                    raise BadRequest(f"a task with id {row_id!r} exists already", field=f"{where}.id")
                ids.add(row_id)
                added.append({**{k: v for k, v in row.items() if k != "scenario"}, "id": row_id, "added_at": now})
            self._write(scenario, existing + added)
            return added

    def clear(self, scenario: str) -> int:
        """Forget every stored task of `scenario`; how many there were."""
        with self._lock:
            count = len(self._load(scenario)[0])
            self._write(scenario, [])
            return count

    def _load(self, scenario: str) -> tuple[list[dict[str, Any]], list[Task]]:
        if scenario not in self._cache:
            path = self._path(scenario)
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            self._remember(scenario, [row for _, row in jsonl_rows(text, f"{path.name}:")])
        return self._cache[scenario]

    def _remember(self, scenario: str, rows: list[dict[str, Any]]) -> None:
        self._cache[scenario] = (rows, [parse_task(row, str(row["id"])) for row in rows])

    @staticmethod
    def _next_id(ids: set[str]) -> str:
        number = len(ids) + 1
        while f"task-{number}" in ids:
            number += 1
        return f"task-{number}"

    def _path(self, scenario: str) -> Path:
        return self.directory / f"{encode_name(validate_scenario_name(scenario, field='scenario'))}.jsonl"

    def _write(self, scenario: str, rows: list[dict[str, Any]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(scenario)
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        fd, temporary = tempfile.mkstemp(prefix=".tasks-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        directory_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
        self._remember(scenario, rows)
