"""The training losses on hand-made tensors (no model): values match the math in their docstrings."""

from __future__ import annotations

import math

import pytest
import torch

from reef.training.losses import clipped_policy_loss, resolve_loss, sft_loss
from reef.training.samples import collate


def test_the_sft_loss_is_the_mean_negative_log_likelihood_of_the_masked_tokens():
    logprobs = torch.tensor([[-9.0, -1.0, -2.0], [-3.0, -9.0, -9.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert sft_loss(logprobs, mask).item() == pytest.approx((1 + 2 + 3) / 3)


def _policy_case():
    # Row 0: A = +1, ratios 1.5 (clipped above at 1.28), 1.1, 0.5 (below the range but min keeps the ratio).
    # Row 1: A = -2, ratios 0.5 (clipped below at 0.8), 1.5 (min keeps the ratio), last token masked out.
    old = torch.zeros(2, 3)
    ratios = torch.tensor([[1.5, 1.1, 0.5], [0.5, 1.5, 1.0]])
    logprobs = torch.log(ratios).requires_grad_(True)
    advantages = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    return logprobs, old, advantages, mask


def test_the_policy_loss_matches_the_clipped_surrogate_computed_by_hand():
    logprobs, old, advantages, mask = _policy_case()
    loss = clipped_policy_loss(logprobs, old, advantages, mask, clip_low=0.2, clip_high=0.28)
    expected = -(1.28 + 1.1 + 0.5 + (0.8 * -2.0) + (1.5 * -2.0)) / 5
    assert loss.item() == pytest.approx(expected)


def test_clipped_tokens_on_either_side_carry_no_gradient():
    logprobs, old, advantages, mask = _policy_case()
    clipped_policy_loss(logprobs, old, advantages, mask, clip_low=0.2, clip_high=0.28).backward()
    grad = logprobs.grad
    assert grad[0, 0].item() == 0.0  # ratio 1.5 > 1 + ε_high with A > 0
    assert grad[1, 0].item() == 0.0  # ratio 0.5 < 1 - ε_low with A < 0
    assert grad[1, 2].item() == 0.0  # masked
    # d/dlogp of -(r·A)/5 is -r·A/5 where the ratio is not clipped.
    assert grad[0, 1].item() == pytest.approx(-1.1 / 5)
    assert grad[0, 2].item() == pytest.approx(-0.5 / 5)
    assert grad[1, 1].item() == pytest.approx(1.5 * 2.0 / 5)


def test_the_kl_penalty_adds_the_k3_estimate_weighted_by_its_coefficient():
    logprobs = torch.zeros(1, 2)
    ref = torch.tensor([[math.log(2.0), 0.0]])
    mask = torch.ones(1, 2)
    advantages = torch.zeros(1)
    loss = clipped_policy_loss(logprobs, logprobs, advantages, mask, 0.2, 0.2, ref_logprobs=ref, kl_coef=0.5)
    assert loss.item() == pytest.approx(0.5 * (2 - math.log(2) - 1) / 2)


def test_collate_aligns_the_completion_mask_and_recorded_logprobs_with_the_scored_positions():
    samples = [
        {"prompt_ids": [5, 6], "completion_ids": [7, 8], "old_logprobs": [-0.5, -0.25], "advantage": 2.0},
        {"prompt_ids": [5], "completion_ids": [9]},
    ]
    batch = collate(samples, pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8], [5, 9, 0, 0]]
    assert batch["mask"].tolist() == [[0, 1, 1], [1, 0, 0]]
    assert batch["old_logprobs"].tolist() == [[0, -0.5, -0.25], [0, 0, 0]]
    assert batch["advantages"].tolist() == [2.0, 0.0]


def test_losses_resolve_by_builtin_name_or_dotted_path():
    assert resolve_loss("grpo") is resolve_loss("rl")
    assert resolve_loss("reef.training.losses:sft") is resolve_loss("sft")
    with pytest.raises(ValueError):
        resolve_loss("nope")
