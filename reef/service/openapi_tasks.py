"""The OpenAPI schema of a gate task (`POST /reef/scenarios/{s}/tasks`), rule for rule what `parse_task` checks.

What a schema cannot say is in the descriptions: a `regex` task's pattern must compile, a workspace `dir` must
exist on the server, and workspace paths and a check's `file` must stay inside the episode root.
"""

from __future__ import annotations

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
    "pattern": r"\S",
    "description": "a relative path inside the episode root (no leading / or ~, no ..)",
}


def _when_checker(checker: _Schema, then: _Schema) -> _Schema:
    return {"if": {"required": ["checker"], "properties": {"checker": checker}}, "then": then}


CHECK_SCHEMA: _Schema = {
    "description": "an agent task's check, run after the agent: a command and its exit status, or a file's text",
    "oneOf": [
        {
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
        },
        {
            "type": "object",
            "required": ["file", "contains"],
            "additionalProperties": False,
            "properties": {"file": _RELATIVE_PATH, "contains": {"type": "string"}},
        },
    ],
}
WORKSPACE_SCHEMA: _Schema = {
    "type": "object",
    "description": "the files an agent episode starts with",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {
        "files": {
            "type": "object",
            "maxProperties": MAX_WORKSPACE_FILES,
            "additionalProperties": {"type": "string"},
            "description": "relative path → text",
        },
        "dir": {"type": "string", "description": "a fixture directory that exists on the server"},
    },
}
TASK_SCHEMA: _Schema = {
    "type": "object",
    "description": "a gate task: `prompt` or `messages`, a `checker` and what it checks against",
    "properties": {
        "id": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]},
        "prompt": {"type": "string"},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object", "required": ["role", "content"], "properties": {"role": {"type": "string"}}},
        },
        "checker": {
            "anyOf": [{"enum": _CHECKERS}, {"type": "string", "pattern": ":"}],
            "description": "exact (the default, or none with a `check`), contains, regex, numeric, f1, none (an "
            "agent task judged by its `check` alone) or package.module:function",
        },
        "answer": {},
        "pattern": {"type": "string", "description": "regex checker: a regular expression (it must compile)"},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TASK_TOKENS},
        "check": CHECK_SCHEMA,
        "workspace": WORKSPACE_SCHEMA,
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
