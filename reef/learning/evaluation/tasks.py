"""Held-out evaluation tasks: one JSONL row each, loaded once per scenario.

A row: `{"prompt": str}` or `{"messages": [...]}`, a `checker` (`exact` | `contains` | `regex` | `numeric` |
`f1` | `package.module:function`), what the checker compares against (`answer`, or `pattern` for `regex`), and
optionally `id` and `max_tokens` (the answer's budget; default `evaluation.max_new_tokens`).
An agent task (the gate of an agent adapter, e.g. pi, runs the agent on it) may add a `workspace` and a `check`
(see `agent_tasks`); with a check and no `checker`, the check alone scores it (checker `none`).
An optional `scenario` restricts a row to one scenario; `settings.evaluation.tasks` may also be a directory
holding `<scenario>.jsonl`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import orjson

from reef.core.errors import BadRequest
from reef.core.path_names import check_path_name
from reef.learning.evaluation.agent_tasks import AgentCheck, Workspace, parse_check, parse_workspace
from reef.learning.evaluation.patterns import PatternError, compile_pattern
from reef.learning.evaluation.ranking import RankedRollout

_BUILTIN_CHECKERS = frozenset({"exact", "contains", "regex", "numeric", "f1", "none"})
MAX_TASK_TOKENS = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    """One held-out task: the conversation to send and how to score the answer."""

    task_id: str
    messages: list[dict[str, Any]]
    checker: str
    answer: Any = None
    pattern: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    workspace: Workspace | None = None
    check: AgentCheck | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GateTasks:
    """What a gate judges on now and where it comes from (`api`, `file`, `api+file`, `held_out` or `none`):
    tasks with checkers, and held-out scored rollouts whose pairs the ranking gate compares."""

    source: str
    tasks: list[Task]
    rankings: list[RankedRollout] = dataclasses.field(default_factory=list)
    pairs: list[tuple[RankedRollout, RankedRollout]] = dataclasses.field(default_factory=list)  # of `rankings`

    def size(self) -> int:
        """How many paired scores the gate gets: one per task and one per ranking pair."""
        return len(self.tasks) + len(self.pairs)

    def to_json(self) -> dict[str, object]:
        shown: dict[str, object] = {"source": self.source, "tasks": len(self.tasks)}
        if self.rankings:
            shown.update(ranked_rollouts=len(self.rankings), ranking_pairs=len(self.pairs))
        return shown


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
    agent_check = parse_check(row["check"], f"{task_id}.check") if "check" in row else None
    workspace = parse_workspace(row["workspace"], f"{task_id}.workspace") if "workspace" in row else None
    checker = row.get("checker", "none" if agent_check is not None else "exact")
    if not isinstance(checker, str) or (checker not in _BUILTIN_CHECKERS and ":" not in checker):
        raise BadRequest(
            "must be exact, contains, regex, numeric, f1 or package.module:function", field=f"{task_id}.checker"
        )
    if checker == "none" and agent_check is None:
        raise BadRequest("checker none needs a `check` (an agent task)", field=f"{task_id}.checker")
    if checker == "regex" and not isinstance(row.get("pattern", row.get("answer")), str):
        raise BadRequest("a regex task needs `pattern`", field=f"{task_id}.pattern")
    if checker in ("exact", "contains", "numeric", "f1") and row.get("answer") is None:
        raise BadRequest(f"a {checker} task needs `answer`", field=f"{task_id}.answer")
    if checker == "numeric" and not _is_number(row["answer"]):
        raise BadRequest("a numeric task's answer must be a number", field=f"{task_id}.answer")
    if checker == "regex":
        try:
            compile_pattern(str(row.get("pattern", row.get("answer"))))
        except PatternError as exc:
            raise BadRequest(f"not a regular expression ({exc})", field=f"{task_id}.pattern")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or "content" not in message:
            raise BadRequest("each message needs `role` and `content`", field=f"{task_id}.messages[{index}]")
    max_tokens = row.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 0 < max_tokens <= MAX_TASK_TOKENS
    ):
        raise BadRequest(f"must be an integer in 1..{MAX_TASK_TOKENS}", field=f"{task_id}.max_tokens")
    if "id" in row and (not isinstance(row["id"], str | int) or isinstance(row["id"], bool) or row["id"] == ""):
        raise BadRequest("must be a non-empty string", field=f"{task_id}.id")
    check_path_name(str(row.get("id", task_id)), f"{task_id}.id")  # names the episodes' trajectory files
    known = {"prompt", "messages", "checker", "answer", "pattern", "scenario", "id", "workspace", "check"}
    return Task(
        task_id=str(row.get("id", task_id)),
        messages=messages,
        checker=checker,
        answer=row.get("answer"),
        pattern=row.get("pattern"),
        extra={k: v for k, v in row.items() if k not in known},
        workspace=workspace,
        check=agent_check,
    )


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def load_tasks(path: Path | None, scenario: str) -> list[Task]:
    """The tasks of `scenario` under `path` (a JSONL file or a directory of `<scenario>.jsonl`); [] if none."""
    if path is None:
        return []
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / f"{scenario}.jsonl"
    if not path.is_file():
        return []
    rows = jsonl_rows(path.read_text(encoding="utf-8"), f"{path.name}:")
    return [
        parse_task(row, where)
        for where, row in rows
        if not isinstance(row, dict) or row.get("scenario") in (None, scenario)
    ]


def jsonl_rows(text: str, prefix: str = "line ") -> list[tuple[str, Any]]:
    """`(where, value)` for each non-blank line of JSONL `text`, `where` naming the line; BadRequest for bad JSON."""
    rows = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{prefix}{line_number}"
        try:
            rows.append((where, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"not JSON ({exc})", field=where)
    return rows
