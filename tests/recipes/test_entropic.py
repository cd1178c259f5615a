"""Entropic leave-one-out advantages against closed-form cases."""

from __future__ import annotations

import math

import pytest

from reef.recipes.entropic import entropic_advantages, entropic_beta, kl_to_uniform


def test_beta_puts_the_kl_to_uniform_at_ln_2() -> None:
    rewards = [0.1, 0.4, 0.2, 0.9, 0.5]
    beta = entropic_beta(rewards)
    assert kl_to_uniform(rewards, beta) == pytest.approx(math.log(2), abs=1e-9)


def test_one_winner_among_four_has_the_closed_form_advantages() -> None:
    # r = [1, 0, 0, 0]: e = [1, b, b, b] with b = e^{-β}; A_0 = 1/b − 1, A_i = b / ((1 + 2b) / 3) − 1.
    rewards = [1.0, 0.0, 0.0, 0.0]
    beta = entropic_beta(rewards)
    b = math.exp(-beta)
    # KL = ln 4 − H(q) with q = (1, b, b, b) / (1 + 3b), solved for ln 2 by the bisection.
    q = [1 / (1 + 3 * b)] + [b / (1 + 3 * b)] * 3
    assert math.log(4) + sum(p * math.log(p) for p in q) == pytest.approx(math.log(2), abs=1e-9)
    advantages = entropic_advantages(rewards)
    assert advantages == pytest.approx([1 / b - 1] + [3 * b / (1 + 2 * b) - 1] * 3)


def test_two_distinct_rewards_keep_beta_bounded() -> None:
    # n = 2: KL can only approach ln 2, so the target halves: H(q) = ln 2 / 2 at a finite β.
    beta = entropic_beta([1.0, 0.0])
    assert math.isfinite(beta) and 0 < beta < 10
    assert kl_to_uniform([1.0, 0.0], beta) == pytest.approx(math.log(2) / 2, abs=1e-9)
    high, low = entropic_advantages([1.0, 0.0]) or []
    assert high == pytest.approx(math.exp(beta) - 1) and low == pytest.approx(math.exp(-beta) - 1)


def test_half_a_group_tied_at_the_top_keeps_beta_bounded() -> None:
    rewards = [2.0, 2.0, 0.0, 0.0]  # KL_max = ln(4 / 2) = ln 2
    beta = entropic_beta(rewards)
    assert math.isfinite(beta)
    assert kl_to_uniform(rewards, beta) == pytest.approx(math.log(2) / 2, abs=1e-9)


def test_advantages_do_not_depend_on_the_reward_scale_or_offset() -> None:
    rewards = [0.3, 0.1, 0.7, 0.2]
    scaled = [10 * r + 5 for r in rewards]
    assert entropic_advantages(scaled) == pytest.approx(entropic_advantages(rewards) or [])


def test_a_constant_group_has_no_advantages() -> None:
    assert entropic_advantages([0.5, 0.5, 0.5]) is None
    assert entropic_advantages([1.0]) is None


def test_the_best_attempt_gets_the_largest_advantage_and_the_worst_a_negative_one() -> None:
    advantages = entropic_advantages([0.2, 0.9, 0.5, 0.1]) or []
    assert max(range(4), key=lambda i: advantages[i]) == 1 and advantages[3] < 0
