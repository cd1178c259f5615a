"""Tasks that arrive as traffic (POST /reef/scenarios/{s}/tasks) may not run code here unless the operator says so.

Three task fields run code on this machine: a `module:function` checker (imported and called in the server
process), `check.command` (run after the agent, in the sandbox) and `workspace.dir` (a directory the server reads
and copies into an episode). The operator's own `evaluation.tasks` file may use them; a task given through the API
may only with `evaluation.allow_api_code`, and its `module:function` checker must then live in one of
`evaluation.checker_modules`. Anything else is a 400 naming the field, before anything is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reef.core.errors import BadRequest
from reef.learning.evaluation.tasks import parse_task

_FLAG = "runs code on this server; the operator must set evaluation.allow_api_code true to accept it through the API"


def refuse_code_from_traffic(
    rows: Sequence[tuple[str, dict[str, Any]]], allow_api_code: bool, checker_modules: Sequence[str]
) -> None:
    """BadRequest naming the first field of `rows` (`(where, row)`) that would run code and is not allowed."""
    for where, row in rows:
        parse_task(row, where)  # a malformed task is refused for what is wrong with it first
        checker = row.get("checker")
        if isinstance(checker, str) and ":" in checker:
            if not allow_api_code:
                raise BadRequest(f"a module:function checker {_FLAG}", field=f"{where}.checker")
            module = checker.partition(":")[0]
            if not any(module == allowed or module.startswith(allowed + ".") for allowed in checker_modules):
                raise BadRequest(
                    f"module {module!r} is not in evaluation.checker_modules {list(checker_modules)}",
                    field=f"{where}.checker",
                )
        check = row.get("check")
        if isinstance(check, dict) and "command" in check and not allow_api_code:
            raise BadRequest(f"a check command {_FLAG}", field=f"{where}.check.command")
        workspace = row.get("workspace")
        if isinstance(workspace, dict) and "dir" in workspace and not allow_api_code:
            raise BadRequest(f"a workspace directory {_FLAG}", field=f"{where}.workspace.dir")
