"""The OpenAPI schema of a gate task (`POST /reef/scenarios/{s}/tasks`), rule for rule what `parse_task` and
`refuse_code_from_traffic` check: what runs code on the server (a `module:function` checker, a check command, a
workspace directory) is in the schema only where `evaluation.allow_api_code` lets the API give it.

What a schema cannot say is in the descriptions: a `regex` task's pattern must compile, a workspace `dir` must
exist on the server, and workspace paths and a check's `file` must stay inside the episode root.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reef.learning.evaluation.agent_tasks import MAX_CHECK_TIMEOUT_S, MAX_WORKSPACE_FILES
from reef.learning.evaluation.tasks import MAX_TASK_TOKENS

_Schema = dict[str, Any]

_NOT_NULL: _Schema = {"not": {"type": "null"}}
_STRING: _Schema = {"type": "string"}
_CHECKERS = ["exact", "contains", "regex", "numeric", "f1", "none"]
_ANSWERED = ["exact", "contains", "numeric", "f1"]
_RELATIVE_PATH: _Schema = {
    "type": "string",
    "pattern": r"^[^/~\\\u0000][^\\\u0000]*$",
    "not": {"anyOf": [{"pattern": r"(^|/)\.\.(/|$)"}, {"pattern": r"^[./]*$"}, {"pattern": r"^\s*$"}]},
    "description": "a relative path inside the episode root (no leading / or ~, no .., no \\ or NUL)",
}


def _when_checker(checker: _Schema, then: _Schema) -> _Schema:
    return {"if": {"required": ["checker"], "properties": {"checker": checker}}, "then": then}


_COMMAND_CHECK: _Schema = {
    "type": "object",
    "required": ["command"],
    "additionalProperties": False,
    "properties": {
        "command": {
            "anyOf": [
                {"type": "string", "pattern": r"\S"},
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
            ]
        },
        "expect_exit": {"type": "integer", "default": 0},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CHECK_TIMEOUT_S, "default": 30},
    },
}
_FILE_CHECK: _Schema = {
    "type": "object",
    "required": ["file", "contains"],
    "additionalProperties": False,
    "properties": {"file": _RELATIVE_PATH, "contains": {"type": "string"}},
}


def _workspace(allow_api_code: bool) -> _Schema:
    properties: dict[str, _Schema] = {
        "files": {
            "type": "object",
            "maxProperties": MAX_WORKSPACE_FILES,
            "additionalProperties": _STRING,
            "propertyNames": _RELATIVE_PATH,
            "description": "relative path → text",
        }
    }
    if allow_api_code:
        properties["dir"] = {"type": "string", "description": "a fixture directory that exists on the server"}
    return {
        "type": "object",
        "description": "the files an agent episode starts with",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": properties,
    }


def _checker(allow_api_code: bool, checker_modules: Sequence[str]) -> _Schema:
    choices: list[_Schema] = [{"enum": _CHECKERS}]
    if allow_api_code and checker_modules:
        modules = "|".join(re.escape(module) for module in checker_modules)
        choices.append({"type": "string", "pattern": f"^({modules})(\\.[^:]*)?:"})
    return {
        "anyOf": choices,
        "description": "exact (the default, or none with a `check`), contains, regex, numeric, f1, none (an agent "
        "task judged by its `check` alone), or package.module:function from evaluation.checker_modules where "
        "evaluation.allow_api_code is on",
    }


def task_schema(allow_api_code: bool = False, checker_modules: Sequence[str] = ()) -> _Schema:
    """A gate task as this server takes it through the API (`evaluation.allow_api_code`, `checker_modules`)."""
    checks = [_COMMAND_CHECK, _FILE_CHECK] if allow_api_code else [_FILE_CHECK]
    return {
        "type": "object",
        "description": "a gate task: `prompt` or `messages`, a `checker` and what it checks against",
        "properties": {
            "id": {
                "anyOf": [
                    {"type": "string", "pattern": "^[^/\\\\\\u0000]+$", "not": {"enum": [".", ".."]}},
                    {"type": "integer"},
                ],
                "description": "names the episodes' files: not . or .., no /, \\ or NUL",
            },
            "prompt": _STRING,
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object", "required": ["role", "content"], "properties": {"role": _STRING}},
            },
            "checker": _checker(allow_api_code, checker_modules),
            "answer": {},
            "pattern": {"type": "string", "description": "regex checker: a regular expression (it must compile)"},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TASK_TOKENS},
            "check": {"description": "an agent task's check, run after the agent", "oneOf": checks},
            "workspace": _workspace(allow_api_code),
        },
        "anyOf": [{"required": ["messages"]}, {"required": ["prompt"]}],
        "allOf": [
            _when_checker({"enum": _ANSWERED}, {"required": ["answer"], "properties": {"answer": _NOT_NULL}}),
            {  # no checker and no check: exact, which needs an answer
                "if": {"not": {"anyOf": [{"required": ["checker"]}, {"required": ["check"]}]}},
                "then": {"required": ["answer"], "properties": {"answer": _NOT_NULL}},
            },
            _when_checker({"const": "numeric"}, {"properties": {"answer": {"type": "number"}}}),
            _when_checker(
                {"const": "regex"},
                {"anyOf": [{"required": ["pattern"]}, {"required": ["answer"], "properties": {"answer": _STRING}}]},
            ),
            _when_checker({"const": "none"}, {"required": ["check"]}),
        ],
    }
