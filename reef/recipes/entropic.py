"""Entropic leave-one-out advantages (TTT-Discover): weight a group's rewards by softmax(β·r), β set adaptively.

For one group's rewards r_1 … r_n (not all equal):

    q_β = softmax(β · r);   β chosen by bisection so that KL(q_β ‖ uniform) = ln n − H(q_β) = τ
    e_i = exp(β (r_i − r_max));   A_i = e_i / mean_{j≠i} e_j − 1

τ = ln 2, unless the group cannot reach it: KL tends to KL_max = ln(n / k) as β → ∞ (k rewards tie for the
maximum), and with two distinct rewards in a pair (n = 2) or half the group tied at the top KL_max ≤ ln 2, so β
would be infinite. Then τ = KL_max / 2 keeps β finite and the advantages bounded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TARGET_KL = math.log(2.0)
_BISECTIONS = 200


def kl_to_uniform(rewards: Sequence[float], beta: float) -> float:
    """KL(softmax(β·r) ‖ uniform) = ln n − H(softmax(β·r))."""
    top = max(rewards)
    weights = [math.exp(beta * (r - top)) for r in rewards]
    total = sum(weights)
    entropy = -sum(w / total * math.log(w / total) for w in weights if w > 0)
    return math.log(len(rewards)) - entropy


def entropic_beta(rewards: Sequence[float], target: float = TARGET_KL) -> float:
    """The β ≥ 0 with KL(softmax(β·r) ‖ uniform) = τ (see the module docstring); rewards must not all be equal."""
    n, top = len(rewards), max(rewards)
    spread = top - min(rewards)
    ties = sum(1 for r in rewards if r == top)
    reachable = math.log(n / ties)
    goal = target if target < reachable - 1e-9 else reachable / 2
    low, high = 0.0, 1.0 / spread
    while kl_to_uniform(rewards, high) < goal:  # KL grows with β: find an upper end, then bisect
        low, high = high, high * 2
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        low, high = (middle, high) if kl_to_uniform(rewards, middle) < goal else (low, middle)
    return (low + high) / 2


def entropic_advantages(rewards: Sequence[float], target: float = TARGET_KL) -> list[float] | None:
    """A_i = e_i / mean_{j≠i} e_j − 1 with β from `entropic_beta`; None when the rewards are all equal (or n < 2)."""
    if len(rewards) < 2 or max(rewards) - min(rewards) <= 1e-12:
        return None
    beta = entropic_beta(rewards, target)
    top = max(rewards)
    weights = [math.exp(beta * (r - top)) for r in rewards]
    total, others = sum(weights), len(weights) - 1
    return [w / ((total - w) / others) - 1.0 for w in weights]
