"""Held-out evaluation tasks: one JSONL row each, loaded once per scenario.

A row: `{"prompt": str}` or `{"messages": [...]}`, a `checker` (`exact` | `contains` | `regex` | `numeric` |
`package.module:function`), and what the checker compares against (`answer`, or `pattern` for `regex`).
An optional `scenario` restricts a row to one scenario; `settings.evaluation.tasks` may also be a directory
holding `<scenario>.jsonl`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from reef.core.errors import BadRequest

_BUILTIN_CHECKERS = frozenset({"exact", "contains", "regex", "numeric"})


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    """One held-out task: the conversation to send and how to score the answer."""

    task_id: str
    messages: list[dict[str, Any]]
    checker: str
    answer: Any = None
    pattern: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def parse_task(row: dict[str, Any], task_id: str) -> Task:
    """Validate one JSONL row; raises BadRequest naming the field."""
    if not isinstance(row, dict):
        raise BadRequest("a task must be a JSON object", field=task_id)
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or not messages:
            raise BadRequest("must be a non-empty list", field=f"{task_id}.messages")
    elif isinstance(row.get("prompt"), str):
        messages = [{"role": "user", "content": row["prompt"]}]
    else:
        raise BadRequest("a task needs `prompt` (string) or `messages`", field=f"{task_id}.prompt")
    checker = row.get("checker", "exact")
    if not isinstance(checker, str) or (checker not in _BUILTIN_CHECKERS and ":" not in checker):
        raise BadRequest(
            "must be exact, contains, regex, numeric or package.module:function", field=f"{task_id}.checker"
        )
    if checker == "regex" and not isinstance(row.get("pattern", row.get("answer")), str):
        raise BadRequest("a regex task needs `pattern`", field=f"{task_id}.pattern")
    if checker in ("exact", "contains", "numeric") and "answer" not in row:
        raise BadRequest(f"a {checker} task needs `answer`", field=f"{task_id}.answer")
    known = {"prompt", "messages", "checker", "answer", "pattern", "scenario", "id"}
    return Task(
        task_id=str(row.get("id", task_id)),
        messages=messages,
        checker=checker,
        answer=row.get("answer"),
        pattern=row.get("pattern"),
        extra={k: v for k, v in row.items() if k not in known},
    )


def load_tasks(path: Path | None, scenario: str) -> list[Task]:
    """The tasks of `scenario` under `path` (a JSONL file or a directory of `<scenario>.jsonl`); [] if none."""
    if path is None:
        return []
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / f"{scenario}.jsonl"
    if not path.is_file():
        return []
    tasks = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{line_number}"
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"not JSON ({exc})", field=where)
        if isinstance(row, dict) and row.get("scenario") not in (None, scenario):
            continue
        tasks.append(parse_task(row, where))
    return tasks
