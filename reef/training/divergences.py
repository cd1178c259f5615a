"""Divergences between a student S and a teacher T over the student's own completion tokens, as plain functions.

Shapes: `student` and `teacher` are log-distributions `[..., V]` (log-softmax over the last axis, full vocabulary or
the `top_k_with_tail` reduction); each divergence returns one value per position `[...]`. Token-level forms take
per-token log-probs `[...]` of the sampled tokens. Nothing here knows about models or batches.
"""

from __future__ import annotations

import math

import torch

TAIL_FLOOR = 1e-7  # the tail bucket keeps at least this much mass, so its log stays finite


def forward_kl(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """KL(T‖S) = Σ_v T(v) · (log T(v) − log S(v)): mass-covering; the student spreads over what the teacher allows."""
    return (teacher.exp() * (teacher - student)).sum(-1)


def reverse_kl(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """KL(S‖T) = Σ_v S(v) · (log S(v) − log T(v)): mode-seeking; the student avoids what the teacher rules out."""
    return (student.exp() * (student - teacher)).sum(-1)


def generalized_jsd(student: torch.Tensor, teacher: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """JSD_β(T, S) = β · KL(T‖M) + (1 − β) · KL(S‖M),  M = β · T + (1 − β) · S  (β = 0.5: the symmetric JSD).

    Bounded by log 2 at β = 0.5 (unlike either KL); it is 0 at β → 0 and β → 1, so β is kept strictly inside.
    """
    if not 0.0 < beta < 1.0:
        raise ValueError(f"jsd beta must lie strictly between 0 and 1, not {beta}")
    log_beta, log_rest = math.log(beta), math.log(1.0 - beta)
    mixture = torch.logsumexp(torch.stack([teacher + log_beta, student + log_rest]), dim=0)
    return beta * forward_kl(mixture, teacher) + (1.0 - beta) * forward_kl(mixture, student)


def top_k_with_tail(student: torch.Tensor, teacher: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both log-distributions reduced to the student's top-k tokens plus one tail bucket, `[..., k + 1]`.

    With I the k most likely tokens under S (chosen without gradient): P'(i) = P(i) for i ∈ I and
    P'(tail) = 1 − Σ_{i∈I} P(i), for P ∈ {S, T}; P' is again a distribution, so any divergence above applies.
    """
    index = student.detach().topk(k, dim=-1).indices
    return _with_tail(student.gather(-1, index)), _with_tail(teacher.gather(-1, index))


def _with_tail(top: torch.Tensor) -> torch.Tensor:
    """Append log(1 − Σ exp(top)) as the last entry, floored at `TAIL_FLOOR`."""
    kept = torch.logsumexp(top, dim=-1, keepdim=True).exp()
    tail = torch.log((1.0 - kept).clamp(min=TAIL_FLOOR))
    return torch.cat([top, tail], dim=-1)


def sampled_reverse_kl_surrogate(student_token: torch.Tensor, teacher_token: torch.Tensor) -> torch.Tensor:
    """The score-function form of reverse KL on tokens y_t sampled from S (on-policy distillation), per position:

        ℓ_t = sg(log S(y_t) − log T(y_t)) · log S(y_t)

    Its gradient ∇ℓ_t = (log S(y_t) − log T(y_t)) · ∇log S(y_t) is an unbiased estimate of ∇KL(S‖T) at position t
    (the omitted E_S[∇log S] is 0): a policy gradient whose per-token reward is −(log S − log T). The value of ℓ_t is
    not the KL; `sampled_reverse_kl` is.
    """
    return (student_token - teacher_token).detach() * student_token


def sampled_reverse_kl(student_token: torch.Tensor, teacher_token: torch.Tensor) -> torch.Tensor:
    """The one-sample estimate of KL(S‖T) at each position: log S(y_t) − log T(y_t), y_t ~ S."""
    return student_token - teacher_token


def importance_weights(logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, cap: float) -> torch.Tensor:
    """w_t = min(exp(log π(y_t) − log π_rollout(y_t)), cap), without gradient: corrects for the student having moved
    since the rollout was sampled (π_rollout: the log-probs the engine recorded), capped to bound the variance."""
    return torch.exp(logprobs.detach() - rollout_logprobs).clamp(max=cap)


def skip_first(mask: torch.Tensor, count: int) -> torch.Tensor:
    """`mask` `[B, C]` (1 on completion tokens, left-aligned) with the first `count` tokens of each row set to 0."""
    if count <= 0:
        return mask
    kept = mask.clone()
    kept[:, :count] = 0
    return kept


def masked_mean(per_token: torch.Tensor, weights: torch.Tensor | float, mask: torch.Tensor) -> torch.Tensor:
    """Σ w_t · m_t · ℓ_t / Σ m_t: the weighted loss averaged over the positions that count."""
    return (per_token * weights * mask).sum() / mask.sum().clamp(min=1)
