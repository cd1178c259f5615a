"""What a finished or streaming local completion looks like in the OpenAI chat format (the engine's pivot)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from reef.core.payloads import TrainingCapture
from reef.inference.local.sampling import Choice
from reef.inference.local.scheduler import Sequence


def new_completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def now_s() -> int:
    return int(time.time())


def usage_of(sequence: Sequence) -> dict[str, int]:
    prompt, completion = len(sequence.prompt_ids), len(sequence.completion_ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def training_of(sequence: Sequence) -> TrainingCapture:
    """Token capture for learning: ids as the model saw and produced them (end-of-sequence token included) and
    each completion token's log-prob under the model at temperature 1 (see `reef.inference.local.sampling`), and
    the precision of the matmuls that computed them (`float32`, `bfloat16`: see `reef.inference.local.llama`)."""
    return {
        "prompt_token_ids": list(sequence.prompt_ids),
        "completion_token_ids": list(sequence.completion_ids),
        "logprobs": list(sequence.logprobs),
        "precision": sequence.precision,
    }


def logprob_entries(tokenizer: Any, choices: list[Choice]) -> list[dict[str, Any]]:
    """OpenAI `logprobs.content` entries for `choices`."""
    return [
        {
            **_token_entry(tokenizer, choice.token_id, choice.logprob),
            "top_logprobs": [_token_entry(tokenizer, token, logprob) for token, logprob in choice.top],
        }
        for choice in choices
    ]


def _token_entry(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    token = tokenizer.decode([token_id])
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def completion_body(
    completion_id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str | None,
    usage: dict[str, int],
    logprobs: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """A `chat.completion` object."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None if logprobs is None else {"content": logprobs},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def chunk(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish_reason: str | None = None,
    logprobs: list[dict[str, Any]] | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk`; `delta=None` makes the usage-only chunk (`choices: []`)."""
    body: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
    if delta is None:
        body["choices"] = []
    else:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        if logprobs is not None:
            choice["logprobs"] = {"content": logprobs}
        body["choices"] = [choice]
    if usage is not None:
        body["usage"] = usage
    return body
