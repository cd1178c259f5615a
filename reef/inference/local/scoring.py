"""Teacher-forced scoring: the log-probability a model gives each token of a known completion after a prompt."""

from __future__ import annotations

from typing import Any

import torch

from reef.core.errors import BadRequest


def check_score_request(prompt_ids: Any, completion_ids: Any, vocab_size: int, max_positions: int) -> None:
    """Raise BadRequest (naming `prompt_ids` / `completion_ids`) unless both are scorable token id lists."""
    _check_ids(prompt_ids, "prompt_ids", vocab_size)
    _check_ids(completion_ids, "completion_ids", vocab_size)
    total = len(prompt_ids) + len(completion_ids)
    if total > max_positions:
        raise BadRequest(
            f"prompt_ids and completion_ids have {total} tokens together; the model's context is {max_positions}",
            "completion_ids",
        )


def completion_logprobs(model: Any, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """log p(completion_ids[i] | prompt_ids + completion_ids[:i]) for each i, from one forward of `model`.

    The logits at position t predict token t+1, so the completion's tokens are read from positions
    len(prompt)-1 ... len(prompt)+len(completion)-2; the last completion token is never fed. As in sampling,
    the log-probs are at temperature 1, in float32.
    """
    ids = torch.tensor([prompt_ids + completion_ids[:-1]], dtype=torch.long, device=model.device)
    logits = model(input_ids=ids, use_cache=False, logits_to_keep=len(completion_ids)).logits[0]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    targets = torch.tensor(completion_ids, dtype=torch.long, device=logprobs.device).unsqueeze(1)
    scores: list[float] = logprobs.gather(1, targets).squeeze(1).tolist()
    return scores


def _check_ids(ids: Any, field: str, vocab_size: int) -> None:
    if not isinstance(ids, list) or not ids:
        raise BadRequest("must be a non-empty list of token ids", field)
    for index, token in enumerate(ids):
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab_size:
            raise BadRequest(f"item {index} is not a token id of this model (0 <= id < {vocab_size})", field)
