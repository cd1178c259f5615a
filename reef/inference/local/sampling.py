"""Sampling parameters of a chat request and the per-step choice of next tokens for a batch of rows.

Log-probs reported for training (and for OpenAI `logprobs`) are the model's log-softmax at temperature 1 of the
chosen token, before temperature, top-p or min-tokens masking: the distribution of the model itself, which is
what importance ratios in RL recipes are computed against. A `response_format` grammar
(`reef.inference.local.structured`) masks the sampling distribution the same way and leaves the log-probs alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from reef.core.errors import BadRequest
from reef.inference.local.structured import Grammar, grammar_of

MAX_TOP_LOGPROBS = 20


@dataclasses.dataclass(frozen=True, slots=True)
class SamplingParams:
    """How one request is decoded. `temperature == 0` means greedy."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    logprobs: bool = False
    top_logprobs: int = 0
    grammar: Grammar | None = None  # from `response_format`: the answer must match it

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def sampling_params(body: dict[str, Any], default_max_new_tokens: int) -> SamplingParams:
    """Validate and read the sampling fields of a chat completions body (vLLM extras included)."""
    max_new_tokens = _int(body, "max_completion_tokens", None)
    if max_new_tokens is None:
        max_new_tokens = _int(body, "max_tokens", None)
    if max_new_tokens is None:
        max_new_tokens = default_max_new_tokens
    if max_new_tokens < 1:
        raise BadRequest("must be at least 1", "max_tokens")
    temperature = _float(body, "temperature", 1.0)
    if not 0.0 <= temperature <= 2.0 + 1e-9:
        raise BadRequest("must be between 0 and 2", "temperature")
    top_p = _float(body, "top_p", 1.0)
    if not 0.0 < top_p <= 1.0:
        raise BadRequest("must be in (0, 1]", "top_p")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(s for s in stop if s)
    else:
        raise BadRequest("must be a string or a list of strings", "stop")
    top_logprobs = _int(body, "top_logprobs", 0) or 0
    if not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
        raise BadRequest(f"must be between 0 and {MAX_TOP_LOGPROBS}", "top_logprobs")
    stop_token_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_token_ids, list) or not all(isinstance(t, int) for t in stop_token_ids):
        raise BadRequest("must be a list of token ids", "stop_token_ids")
    n = body.get("n")
    if n not in (None, 1):
        raise BadRequest("only n=1 is supported by the local engine", "n")
    return SamplingParams(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        stop=stops,
        stop_token_ids=tuple(stop_token_ids),
        seed=_int(body, "seed", None),
        min_tokens=max(0, _int(body, "min_tokens", 0) or 0),
        ignore_eos=bool(body.get("ignore_eos", False)),
        logprobs=bool(body.get("logprobs", False)),
        top_logprobs=top_logprobs,
        grammar=grammar_of(body),
    )


def _int(body: dict[str, Any], field: str, default: int | None) -> int | None:
    value = body.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest("must be an integer", field)
    return value


def _float(body: dict[str, Any], field: str, default: float) -> float:
    value = body.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest("must be a number", field)
    return float(value)


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """The token picked for one row, its log-prob (temperature 1) and, when asked, the top alternatives."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


def pick_tokens(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
    banned: list[tuple[int, ...]],
    allowed: list[torch.Tensor | None] | None = None,
) -> list[Choice]:
    """Choose the next token of each row of `logits` ([rows, vocab]) under that row's parameters.

    `banned[i]` are token ids row i may not pick yet (end-of-sequence ids while `min_tokens` is unmet);
    `allowed[i]`, when given, a bool mask [vocab] of the only tokens row i may pick (its grammar's).
    """
    logits = logits.float()
    logprobs = torch.log_softmax(logits, dim=-1)
    masks = allowed or [None] * len(params)
    if any(banned) or any(m is not None for m in masks):
        logits = logits.clone()
        for row, ids in enumerate(banned):
            if ids:
                logits[row, list(ids)] = -math.inf
        for row, mask in enumerate(masks):
            if mask is not None:
                logits[row].masked_fill_(~mask, -math.inf)
    # numpy's argmax over a CPU row of 49,152 logits takes a seventh of torch's time.
    chosen = (logits.numpy().argmax(axis=-1) if logits.device.type == "cpu" else torch.argmax(logits, dim=-1)).tolist()
    # Rows with no seed and no top_p draw together (one softmax and one draw for all of them); a seeded row
    # draws from its own generator and a top_p row from its own nucleus.
    together = [r for r, p in enumerate(params) if not p.greedy and p.top_p >= 1.0 and generators[r] is None]
    if together:
        index = torch.tensor(together, device=logits.device)
        temperature = torch.tensor([params[r].temperature for r in together], device=logits.device).unsqueeze(1)
        drawn = _draw(torch.softmax(logits.index_select(0, index) / temperature, dim=-1), None)
        for row, token in zip(together, drawn.tolist(), strict=True):
            chosen[row] = token
    alone = set(together)
    for row, p in enumerate(params):
        if not p.greedy and row not in alone:
            chosen[row] = _sample(logits[row], p, generators[row])
    picked = logprobs[torch.arange(len(chosen)), torch.tensor(chosen)].tolist()
    choices = []
    for row, p in enumerate(params):
        top: tuple[tuple[int, float], ...] = ()
        if p.top_logprobs:
            best = torch.topk(logprobs[row], p.top_logprobs)
            top = tuple(zip(best.indices.tolist(), best.values.tolist(), strict=True))
        choices.append(Choice(chosen[row], picked[row], top))
    return choices


def _sample(logits: torch.Tensor, p: SamplingParams, generator: torch.Generator | None) -> int:
    scaled = logits / p.temperature
    if p.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= p.top_p
        sorted_logits[drop] = -math.inf
        scaled = torch.full_like(scaled, -math.inf).scatter(0, order, sorted_logits)
    probs = torch.softmax(scaled, dim=-1)
    return int(_draw(probs.unsqueeze(0), generator)[0])


def _draw(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of `probs` ([rows, vocab]) drawn from it: where one uniform number falls on the row's
    cumulative distribution (summed in float64). `torch.multinomial` draws the same distribution but costs about
    twenty times as long on a CPU at a vocabulary of 49,152."""
    cumulative = probs.double().cumsum(dim=-1)
    total = cumulative[:, -1:]
    uniform = torch.rand(probs.shape[0], 1, dtype=torch.float64, generator=generator).to(probs.device) * total
    uniform = torch.minimum(uniform, torch.nextafter(total, torch.zeros_like(total)))  # below the total mass
    # `right`: the first token whose cumulative mass exceeds the draw, so a token of probability 0 is never drawn.
    return torch.searchsorted(cumulative, uniform, right=True).squeeze(1)
