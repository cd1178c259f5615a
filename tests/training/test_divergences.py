"""The distillation divergences against direct computation on small tensors, and one gradient by finite differences."""

from __future__ import annotations

import math

import pytest
import torch

from reef.training import divergences


def distributions(seed: int = 0, shape: tuple[int, ...] = (2, 3, 5)) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    student = torch.log_softmax(torch.randn(shape, generator=generator, dtype=torch.float64), -1)
    teacher = torch.log_softmax(torch.randn(shape, generator=generator, dtype=torch.float64), -1)
    return student, teacher


def kl(p: list[float], q: list[float]) -> float:
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True) if pi > 0)


def rows(tensor: torch.Tensor) -> list[list[float]]:
    return tensor.exp().reshape(-1, tensor.shape[-1]).tolist()


def test_forward_and_reverse_kl_match_the_sum_written_out():
    student, teacher = distributions()
    forward = divergences.forward_kl(student, teacher).reshape(-1).tolist()
    reverse = divergences.reverse_kl(student, teacher).reshape(-1).tolist()
    for position, (s, t) in enumerate(zip(rows(student), rows(teacher), strict=True)):
        assert forward[position] == pytest.approx(kl(t, s), rel=1e-9)
        assert reverse[position] == pytest.approx(kl(s, t), rel=1e-9)


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_generalized_jsd_matches_the_mixture_formula(beta):
    student, teacher = distributions(seed=1)
    jsd = divergences.generalized_jsd(student, teacher, beta).reshape(-1).tolist()
    for position, (s, t) in enumerate(zip(rows(student), rows(teacher), strict=True)):
        m = [beta * ti + (1 - beta) * si for si, ti in zip(s, t, strict=True)]
        assert jsd[position] == pytest.approx(beta * kl(t, m) + (1 - beta) * kl(s, m), rel=1e-9)


def test_jsd_is_zero_for_equal_distributions_and_at_most_log_two_at_one_half():
    student, teacher = distributions(seed=2)
    assert divergences.generalized_jsd(student, student).abs().max() < 1e-12
    far = torch.log(torch.tensor([[1 - 1e-12, 1e-12], [1e-12, 1 - 1e-12]], dtype=torch.float64))
    assert divergences.generalized_jsd(far[0], far[1]) <= math.log(2) + 1e-9
    with pytest.raises(ValueError):
        divergences.generalized_jsd(student, teacher, 1.0)


def test_top_k_with_tail_keeps_the_students_top_tokens_and_lumps_the_rest():
    student = torch.log(torch.tensor([0.5, 0.3, 0.1, 0.06, 0.04], dtype=torch.float64))
    teacher = torch.log(torch.tensor([0.1, 0.2, 0.3, 0.2, 0.2], dtype=torch.float64))
    reduced_student, reduced_teacher = divergences.top_k_with_tail(student, teacher, 2)
    assert reduced_student.exp().tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert reduced_teacher.exp().tolist() == pytest.approx([0.1, 0.2, 0.7])
    # With k = V − 1 the tail is the last token and the divergence equals the full one.
    s, t = distributions(seed=3)
    top_s, top_t = divergences.top_k_with_tail(s, t, 4)
    assert divergences.forward_kl(top_s, top_t) == pytest.approx(divergences.forward_kl(s, t), rel=1e-6)


def test_the_sampled_reverse_kl_surrogate_has_the_score_function_gradient():
    logits = torch.tensor([0.3, -0.2, 1.1], dtype=torch.float64, requires_grad=True)
    teacher = torch.log_softmax(torch.tensor([0.0, 0.5, -0.5], dtype=torch.float64), -1)
    student = torch.log_softmax(logits, -1)
    sampled = 2
    divergences.sampled_reverse_kl_surrogate(student[sampled], teacher[sampled]).backward()
    expected = (student[sampled] - teacher[sampled]).detach() * (
        torch.eye(3, dtype=torch.float64)[sampled] - student.exp()
    )
    assert logits.grad is not None and torch.allclose(logits.grad, expected.detach())
    # Averaged over every token weighted by S, the surrogate's gradient is the exact gradient of KL(S‖T).
    logits.grad = None
    s = torch.log_softmax(logits, -1)
    expectation = sum(
        s[v].exp().detach() * divergences.sampled_reverse_kl_surrogate(s[v], teacher[v]) for v in range(3)
    )
    exact = torch.autograd.grad(divergences.reverse_kl(torch.log_softmax(logits, -1), teacher), logits)[0]
    assert torch.allclose(torch.autograd.grad(expectation, logits)[0], exact)


def test_the_top_k_jsd_and_forward_kl_gradients_match_finite_differences():
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn((2, 6), generator=generator, dtype=torch.float64, requires_grad=True)
    teacher = torch.log_softmax(torch.randn((2, 6), generator=generator, dtype=torch.float64), -1)

    def loss(x: torch.Tensor) -> torch.Tensor:
        student, top_teacher = divergences.top_k_with_tail(torch.log_softmax(x, -1), teacher, 3)
        return (
            divergences.generalized_jsd(student, top_teacher, 0.5).sum()
            + divergences.forward_kl(torch.log_softmax(x, -1), teacher).sum()
        )

    (analytic,) = torch.autograd.grad(loss(logits), logits)
    step = 1e-6
    numeric = torch.zeros_like(logits)
    with torch.no_grad():
        for index in range(logits.numel()):
            bump = torch.zeros(logits.numel(), dtype=torch.float64)
            bump[index] = step
            bump = bump.reshape(logits.shape)
            numeric.view(-1)[index] = (loss(logits + bump) - loss(logits - bump)) / (2 * step)
    assert torch.allclose(analytic, numeric, atol=1e-6)


def test_importance_weights_are_capped_ratios_without_gradient():
    logprobs = torch.log(torch.tensor([0.5, 0.9, 0.1])).requires_grad_(True)
    recorded = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    weights = divergences.importance_weights(logprobs, recorded, cap=2.0)
    assert weights.tolist() == pytest.approx([1.0, 2.0, 0.5])
    assert not weights.requires_grad


def test_skip_first_masks_the_first_tokens_and_the_weighted_mean_counts_only_the_rest():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    kept = divergences.skip_first(mask, 1)
    assert kept.tolist() == [[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    per_token = torch.tensor([[9.0, 1.0, 2.0, 7.0], [9.0, 3.0, 5.0, 5.0]])
    weights = torch.tensor([[1.0], [0.0]])
    assert divergences.masked_mean(per_token, weights, kept).item() == pytest.approx((1.0 + 2.0) / 3)
