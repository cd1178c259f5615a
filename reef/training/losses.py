"""The training losses, as plain functions on per-token log-probabilities.

Shapes: `logprobs`, `mask`, `old_logprobs`, `ref_logprobs` are `[B, T]`, aligned so that position t holds
log p(x_{t+1} | x_{≤t}); `mask` is 1 on the completion tokens that carry the loss, and the job computes
`logprobs` and `ref_logprobs` there alone (0 elsewhere). `advantages` is `[B]`.
A recipe names its loss (`sft`, `rl`, `grpo`) or a dotted `package.module:function` with the
`LossFn` signature; `resolve_loss` turns that name into the function the job calls. A loss reads its settings
(the clip range, the KL coefficient) from the recipe's configuration model, by attribute: their defaults are the
model's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch

from reef.training.loss_names import unknown_loss_message

# (tensors of one micro-batch, logprobs under the trained model, logprobs under the base model or None, the
# recipe's configuration: its config model, or the dict a recipe without one was given)
LossFn = Callable[[Mapping[str, torch.Tensor], torch.Tensor, torch.Tensor | None, Any], torch.Tensor]


class ClipRange(Protocol):
    """What the clipped policy gradient reads from a recipe's configuration."""

    @property
    def clip_low(self) -> float: ...

    @property
    def clip_high(self) -> float: ...


def kl_coefficient(config: Any) -> float:
    """The configuration's `kl_coef`; 0 for a recipe whose configuration has no KL term."""
    value = config.get("kl_coef") if isinstance(config, Mapping) else getattr(config, "kl_coef", None)
    return float(value or 0.0)


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked next-token negative log-likelihood, averaged over the demonstration tokens of the micro-batch.

    L = − Σ_{b,t} m_{b,t} · log π(y_{b,t}) / Σ_{b,t} m_{b,t}
    """
    return -(logprobs * mask).sum() / mask.sum().clamp(min=1)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> torch.Tensor:
    """Clipped importance-weighted policy gradient against the recorded rollout, averaged over completion tokens.

        r_t = exp(log π(y_t) − log π_old(y_t))                       (π_old: log-probs recorded at serving time)
        L   = − mean_t min(r_t · A, clip(r_t, 1 − ε_low, 1 + ε_high) · A)  + β · mean_t KL_t
        KL_t = exp(log π_ref − log π) − (log π_ref − log π) − 1         (k3 estimator; π_ref: the base model)

    with A the sequence's advantage broadcast over its tokens, ε_low = `clip_low`, ε_high = `clip_high`,
    β = `kl_coef` (the KL term needs `ref_logprobs`).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    advantage = advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * advantage, torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantage)
    per_token = -surrogate
    if kl_coef and ref_logprobs is not None:
        log_ratio = ref_logprobs - logprobs
        per_token = per_token + kl_coef * (torch.exp(log_ratio) - log_ratio - 1)
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def sft(
    batch: Mapping[str, torch.Tensor],
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    config: Any,
) -> torch.Tensor:
    """The `sft` recipe's loss: `sft_loss` on the completion mask."""
    return sft_loss(logprobs, batch["mask"])


def rl(
    batch: Mapping[str, torch.Tensor],
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    config: ClipRange,
) -> torch.Tensor:
    """The `rl` and `grpo` recipes' loss: `clipped_policy_loss` with the recipe's clip range and KL coefficient."""
    return clipped_policy_loss(
        logprobs,
        batch["old_logprobs"],
        batch["advantages"],
        batch["mask"],
        clip_low=config.clip_low,
        clip_high=config.clip_high,
        ref_logprobs=ref_logprobs,
        kl_coef=kl_coefficient(config),
    )


PLAIN: dict[str, LossFn] = {"sft": sft, "rl": rl, "grpo": rl}  # by name: `loss_names.PLAIN_LOSSES`


def resolve_loss(name: str) -> LossFn:
    """A built-in loss by name, or `package.module:function` imported; ValueError for any other name."""
    if name in PLAIN:
        return PLAIN[name]
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise ValueError(unknown_loss_message(name))
    return getattr(importlib.import_module(module_name), attribute)
