"""Log-probs of chosen tokens through the output projection, chunk by chunk, never holding `[N, V]` in fp32.

For hidden states h_n `[N, H]`, the output projection W `[V, H]` and the chosen tokens y_n:

    z_n = W h_n,   log p(y_n) = z_{n, y_n} − log Σ_v exp(z_{n, v})

and, for an upstream gradient g_n = ∂L/∂log p(y_n), with P_n = softmax(z_n) and e_y the one-hot of y_n:

    ∂L/∂h_n = g_n · (e_{y_n} − P_n)ᵀ W,      ∂L/∂W = Σ_n g_n · (e_{y_n} − P_n) h_nᵀ

The forward keeps the per-row log-normaliser and, in bfloat16 where they fit in `KEPT_LOGITS_BYTES`, the
logits as the matmul returned them (8 × 64 completion tokens: 50 MB); the backward reuses them, or recomputes
each chunk's logits (the same values) where they were not kept (fp32, or too many rows), at the cost of a third
matmul as large as the forward's. At most one chunk's `[rows, V]` is fp32 at a time, instead of the full
logits, their log-softmax and its gradient (8 × 128 × 49,152 fp32 values are 200 MB each). The matmuls run in
`compute_dtype` (bfloat16 uses this CPU's AMX or AVX-512 BF16); the log-normaliser, the softmax and the returned
log-probs are fp32.

Each chunk's fp32 logits are worked on in place (max, subtract, exp, sum; then the gradient over the
probabilities), in one buffer reused from chunk to chunk: a fresh 25 MB tensor per elementwise op costs more
in page faults than the op itself. A frozen output projection (a LoRA's tied embeddings) is cast to
`compute_dtype` once, not twice a step (`kept_cast`).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from reef.training.samples import token_logprobs

CHUNK_ROWS = 128  # 128 × 49,152 fp32 logits: 25 MB at a time
KEPT_LOGITS_BYTES = 256 << 20  # the forward's logits kept for the backward up to this size (bfloat16: 2,730 rows)


class ChunkedTokenLogprobs(torch.autograd.Function):
    """`log p(y_n)` `[N]` from `hidden` `[N, H]`, `weight` `[V, H]`, `targets` `[N]` (the math: module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        compute_dtype: torch.dtype,
        chunk_rows: int,
        for_backward: bool,
    ) -> torch.Tensor:
        weight_c = kept_cast(weight, compute_dtype)
        logprobs = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        log_normalisers = torch.empty_like(logprobs)
        buffer = _Buffer()
        # fp32 logits are worked on in place (no buffer copy), so only a narrower dtype's are kept; one tensor
        # per chunk, each under glibc's mapping threshold, so a step reuses heap memory instead of a fresh mapping.
        size = hidden.shape[0] * weight.shape[0] * weight_c.element_size()
        keep = for_backward and weight_c.element_size() < 4 and size <= KEPT_LOGITS_BYTES
        ctx.kept_logits = [] if keep else None
        with torch.autocast(hidden.device.type, enabled=False):  # the dtypes here are explicit
            for rows in _chunks(hidden.shape[0], chunk_rows):
                chunk_logits = hidden[rows].to(compute_dtype) @ weight_c.T
                if ctx.kept_logits is not None:
                    ctx.kept_logits.append(chunk_logits)
                logits = buffer.fp32(chunk_logits)
                chosen = logits.gather(-1, targets[rows].unsqueeze(-1)).squeeze(-1)
                peak = logits.max(dim=-1, keepdim=True).values
                log_normalisers[rows] = logits.sub_(peak).exp_().sum(dim=-1).log_() + peak.squeeze(-1)
                logprobs[rows] = chosen - log_normalisers[rows]
        ctx.save_for_backward(hidden, weight, targets, log_normalisers)
        ctx.compute_dtype, ctx.chunk_rows = compute_dtype, chunk_rows
        return logprobs

    @staticmethod
    def backward(ctx: Any, grad_logprobs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        hidden, weight, targets, log_normalisers = ctx.saved_tensors
        compute_dtype = ctx.compute_dtype
        weight_c = kept_cast(weight, compute_dtype)
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if ctx.needs_input_grad[1] else None
        buffer = _Buffer()
        for index, rows in enumerate(_chunks(hidden.shape[0], ctx.chunk_rows)):
            hidden_c = hidden[rows].to(compute_dtype)
            logits = ctx.kept_logits[index] if ctx.kept_logits is not None else hidden_c @ weight_c.T
            probs = buffer.fp32(logits).sub_(log_normalisers[rows].unsqueeze(-1)).exp_()
            grad = grad_logprobs[rows].unsqueeze(-1)
            # g · (e_y − P), written in place over P.
            grad_logits = probs.mul_(-grad).scatter_add_(-1, targets[rows].unsqueeze(-1), grad).to(compute_dtype)
            if grad_hidden is not None:
                grad_hidden[rows] = (grad_logits @ weight_c).to(hidden.dtype)
            if grad_weight is not None:
                grad_weight += (grad_logits.T @ hidden_c).float()
        if grad_weight is not None:
            grad_weight = grad_weight.to(weight.dtype)
        ctx.kept_logits = None
        return grad_hidden, grad_weight, None, None, None, None


def chunked_token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    compute_dtype: torch.dtype = torch.float32,
    chunk_rows: int = CHUNK_ROWS,
) -> torch.Tensor:
    """log p(y_n) `[N]` for hidden states `[N, H]` under the output projection `weight` `[V, H]`; differentiable."""
    for_backward = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    logprobs: torch.Tensor = ChunkedTokenLogprobs.apply(
        hidden, weight, targets, compute_dtype, chunk_rows, for_backward
    )
    return logprobs


def completion_logprobs(model: Any, batch: dict[str, torch.Tensor], compute_dtype: torch.dtype) -> torch.Tensor:
    """`samples.token_logprobs` at the positions where `batch["mask"]` is 1 (0 elsewhere), `[B, L-1]`: one pass
    through the model's body, then the output projection on those positions alone (`chunked_token_logprobs`).

    Models whose head is not a plain bias-free projection (a LoRA on `lm_head`, soft-capped logits) take the
    full-logits path instead."""
    parts = body_and_head(model)
    if parts is None:
        return token_logprobs(model, batch) * batch["mask"]
    body, head = parts
    hidden = body(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    positions = batch["mask"].nonzero(as_tuple=True)
    targets = batch["input_ids"][:, 1:][positions]
    chosen = chunked_token_logprobs(hidden[:, :-1][positions], head.weight, targets, compute_dtype)
    return torch.zeros(batch["mask"].shape, dtype=chosen.dtype, device=chosen.device).index_put(positions, chosen)


def body_and_head(model: Any) -> tuple[Any, torch.nn.Linear] | None:
    """(the model's decoder, its output projection) where the logits are that plain bias-free projection of the
    decoder's last hidden state, so a caller may project only the positions it reads; None for any other head
    (a LoRA on `lm_head`, soft-capped or scaled logits, a model that is not a transformers causal LM)."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not hasattr(causal_lm, "get_output_embeddings") or not hasattr(causal_lm, "get_decoder"):
        return None
    head = causal_lm.get_output_embeddings()
    if type(head) is not torch.nn.Linear or head.bias is not None or _caps_logits(causal_lm.config):
        return None
    return causal_lm.get_decoder(), head


class _Buffer:
    """One fp32 `[rows, V]` buffer, reused by every chunk of a pass (the last chunk takes its first rows)."""

    def __init__(self) -> None:
        self._data: torch.Tensor | None = None

    def fp32(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` as fp32, in the buffer (`logits` itself where it is fp32 already)."""
        if logits.dtype == torch.float32:
            return logits
        if self._data is None or self._data.shape[0] < logits.shape[0] or self._data.shape[1:] != logits.shape[1:]:
            self._data = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
        return self._data[: logits.shape[0]].copy_(logits)


_casts: dict[int, tuple[weakref.ref[torch.Tensor], int, torch.dtype, torch.Tensor]] = {}


def kept_cast(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`weight.to(dtype)`, kept while `weight` is the same live tensor at the same version: a frozen output
    projection (the student's, a teacher's) is cast once per job instead of in every forward and backward."""
    if weight.dtype == dtype:
        return weight
    kept = _casts.get(id(weight))
    if kept is not None and kept[0]() is weight and kept[1] == weight._version and kept[2] == dtype:
        return kept[3]
    cast = weight.detach().to(dtype)
    for key in [key for key, (ref, *_) in _casts.items() if ref() is None]:
        del _casts[key]  # tensors that are gone
    _casts[id(weight)] = (weakref.ref(weight), weight._version, dtype, cast)
    return cast


def _caps_logits(config: Any) -> bool:
    return any(getattr(config, name, None) is not None for name in ("final_logit_softcapping", "logit_scale"))


def _chunks(total: int, size: int) -> list[slice]:
    return [slice(start, min(start + size, total)) for start in range(0, total, size)]
