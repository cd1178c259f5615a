"""Token capture from an OpenAI-compatible vLLM or SGLang server, in the embedded engine's `training` shape.

The embedded engine records `{"prompt_token_ids", "completion_token_ids", "logprobs"}` beside each answer; the
on-policy recipes learn from nothing else. vLLM and SGLang give the same facts when asked:

- chat completions with `logprobs: true` and `return_token_ids: true` (vLLM >= 0.10.2, pinned 0.11.0; SGLang's
  OpenAI protocol as of 0.5): the completion's ids in `choices[0].token_ids`, the prompt's in the response's
  `prompt_token_ids` (vLLM) or `choices[0].prompt_token_ids` (SGLang), one log-prob per completion token in
  `choices[0].logprobs.content[i].logprob`;
- teacher-forced scoring of given tokens: vLLM's completions with the ids as `prompt`, `prompt_logprobs: 0` and
  `max_tokens: 1` (`choices[0].prompt_logprobs`: per position `null` or `{"<id>": {"logprob": …}}`); SGLang's
  native `/generate` with `input_ids`, `return_logprob: true` and `logprob_start_len` (`meta_info.
  input_token_logprobs`: `[logprob, token_id, text]` per position).

A body whose ids and log-probs do not line up gives no capture (None): a guess would train on the wrong tokens.
Streamed answers: `reef.inference.capture_stream`.
"""

from __future__ import annotations

from typing import Any, Literal

from reef.core.payloads import TrainingCapture

Backend = Literal["vllm", "sglang"]
CAPTURE_FIELDS: dict[str, Any] = {"logprobs": True, "return_token_ids": True}
_ADDED_TO_ANSWER = ("prompt_token_ids", "token_ids")


def with_capture(body: dict[str, Any]) -> dict[str, Any]:
    """The chat request `body` asking the server for token ids and log-probs as well."""
    return {**body, **CAPTURE_FIELDS}


def training_from_chat(response: dict[str, Any]) -> TrainingCapture | None:
    """The `training` capture of a non-streaming chat completion from vLLM or SGLang, or None without one."""
    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if choice is None:
        return None
    prompt_ids = _ids(response.get("prompt_token_ids") or choice.get("prompt_token_ids"))
    completion_ids = _ids(choice.get("token_ids"))
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if prompt_ids is None or completion_ids is None or not isinstance(content, list):
        return None
    logprobs = [entry.get("logprob") if isinstance(entry, dict) else None for entry in content]
    numbers = [float(v) for v in logprobs if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) != len(logprobs) or len(numbers) != len(completion_ids):
        return None
    return {"prompt_token_ids": prompt_ids, "completion_token_ids": completion_ids, "logprobs": numbers}


def client_view(response: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The answer as the client asked for it: without the ids Reef requested, and without log-probs it did not
    ask for."""
    view = {k: v for k, v in response.items() if k not in _ADDED_TO_ANSWER and k != "prompt_logprobs"}
    choices = view.get("choices")
    if isinstance(choices, list):
        keep_logprobs = bool(request.get("logprobs"))
        view["choices"] = [
            {k: v for k, v in c.items() if k not in _ADDED_TO_ANSWER and (keep_logprobs or k != "logprobs")}
            if isinstance(c, dict)
            else c
            for c in choices
        ]
    return view


def score_request(
    backend: Backend, model: str, base_model: str, prompt_ids: list[int], completion_ids: list[int]
) -> tuple[str, dict[str, Any]]:
    """(URL path, JSON body) asking `backend` for the log-probs of `completion_ids` after `prompt_ids` under `model`
    (an adapter's name, or `base_model`)."""
    ids = list(prompt_ids) + list(completion_ids)
    if backend == "vllm":
        return "/v1/completions", {"model": model, "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0}
    return "/generate", {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": 0},
        "return_logprob": True,
        "logprob_start_len": len(prompt_ids),
        **({"lora_path": model} if model != base_model else {}),
    }


def scores_from(backend: Backend, response: dict[str, Any], completion_ids: list[int]) -> list[float]:
    """The per-token log-probs of `completion_ids` in a scoring answer; ValueError when the body lacks them."""
    count = len(completion_ids)
    if backend == "vllm":
        choices = response.get("choices") or [{}]
        positions = (choices[0] or {}).get("prompt_logprobs") or response.get("prompt_logprobs")
        if not isinstance(positions, list) or len(positions) < count:
            raise ValueError("the vLLM answer carries no prompt_logprobs for the scored tokens")
        found = []
        for token_id, entry in zip(completion_ids, positions[-count:] if count else [], strict=True):
            value = (entry or {}).get(str(token_id)) if isinstance(entry, dict) else None
            if not isinstance(value, dict) or not isinstance(value.get("logprob"), int | float):
                raise ValueError(f"the vLLM answer has no log-prob for token {token_id}")
            found.append(float(value["logprob"]))
        return found
    rows = (response.get("meta_info") or {}).get("input_token_logprobs")
    if not isinstance(rows, list) or len(rows) < count:
        raise ValueError("the SGLang answer carries no input_token_logprobs for the scored tokens")
    found = []
    for token_id, row in zip(completion_ids, rows[-count:] if count else [], strict=True):
        if not (isinstance(row, list) and len(row) >= 2 and row[1] == token_id and isinstance(row[0], int | float)):
            raise ValueError(f"the SGLang answer has no log-prob for token {token_id}")
        found.append(float(row[0]))
    return found


def _ids(value: Any) -> list[int] | None:
    """`value` as a non-empty list of token ids, or None."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return list(value)
