"""The fused LoRA projection of the bfloat16 training step against the plain formula and against peft's layer."""

from __future__ import annotations

import torch

from reef.training import chunked_logprobs
from reef.training.chunked_logprobs import chunked_token_logprobs
from reef.training.fused_lora import FusedLoraProjection, fuse_lora_projections

SCALE = 2.0


def tensors(seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, 16, generator=generator, requires_grad=True)
    weight = torch.randn(12, 16, generator=generator)
    lora_a = (0.3 * torch.randn(4, 16, generator=generator)).requires_grad_()
    lora_b = (0.3 * torch.randn(12, 4, generator=generator)).requires_grad_()
    upstream = torch.randn(3, 5, 12, generator=generator)
    return x, weight, lora_a, lora_b, upstream


def plain(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor) -> torch.Tensor:
    return x @ weight.T + SCALE * (x @ lora_a.T) @ lora_b.T


def test_the_fused_projection_and_its_gradients_equal_the_plain_formula():
    x, weight, lora_a, lora_b, upstream = tensors()
    expected = plain(x, weight, lora_a, lora_b)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (x, lora_a, lora_b))

    got = FusedLoraProjection.apply(x, weight, lora_a, lora_b, SCALE, torch.float32)
    grads = torch.autograd.grad((got * upstream).sum(), (x, lora_a, lora_b))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for value, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(value, want, atol=1e-5, rtol=1e-5)

    # bfloat16 matmuls (the training step's): within bfloat16 rounding of the fp32 values, and fp32 out.
    rounded = FusedLoraProjection.apply(x, weight.to(torch.bfloat16), lora_a, lora_b, SCALE, torch.bfloat16)
    rounded_grads = torch.autograd.grad((rounded * upstream).sum(), (x, lora_a, lora_b))
    assert rounded.dtype == torch.float32
    assert (rounded - expected).norm() < 0.01 * expected.norm()
    for value, want in zip(rounded_grads, expected_grads, strict=True):
        assert value.dtype == torch.float32 and (value - want).norm() < 0.01 * want.norm()


def test_the_adapter_delta_is_not_rounded_to_the_bfloat16_grid_of_the_base_output():
    """A fresh adapter's delta is far below a bfloat16 step of W x: summed in fp32 it survives whole."""
    x, weight, lora_a, lora_b, _ = tensors(1)
    tiny_b = (lora_b * 1e-4).detach()
    base = FusedLoraProjection.apply(
        x, weight.to(torch.bfloat16), lora_a, torch.zeros_like(tiny_b), SCALE, torch.bfloat16
    )
    with_delta = FusedLoraProjection.apply(x, weight.to(torch.bfloat16), lora_a, tiny_b, SCALE, torch.bfloat16)
    delta = SCALE * (x.to(torch.bfloat16).float() @ lora_a.to(torch.bfloat16).float().T) @ tiny_b.T
    torch.testing.assert_close(with_delta - base, delta, atol=1e-6, rtol=1e-2)


def peft_projections(seed: int) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model = torch.nn.Sequential()
    model.add_module("q", torch.nn.Linear(16, 12, bias=False))
    model.add_module("k", torch.nn.Linear(16, 6, bias=False))
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q", "k"]))
    for name, parameter in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.3)  # a trained adapter, not peft's zero start
    return peft_model


def run(model: torch.nn.Module, x: torch.Tensor, upstream: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Both projections read the same input (as q, k and v do); (outputs..., input grad, adapter grads...)."""
    layers = model.base_model.model
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q, k = layers.q(x), layers.k(x)
    loss = (q * upstream["q"]).sum() + (k * upstream["k"]).sum()
    adapters = [p for p in model.parameters() if p.requires_grad]
    return q, k, *torch.autograd.grad(loss, [x, *adapters])


def test_fused_peft_layers_give_peft_values_and_fall_back_where_they_do_not_apply():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(2, 7, 16, generator=generator, requires_grad=True)
    upstream = {"q": torch.randn(2, 7, 12, generator=generator), "k": torch.randn(2, 7, 6, generator=generator)}
    reference, fused = peft_projections(3), peft_projections(3)
    for model in (reference, fused):  # what `precision` does: the base output upcast before the sum
        for module in model.modules():
            if hasattr(module, "base_layer"):
                module.base_layer.register_forward_hook(lambda _m, _i, out: out.float())
    assert fuse_lora_projections(fused) == 2

    for got, want in zip(run(fused, x, upstream), run(reference, x, upstream), strict=True):
        assert got.dtype == want.dtype == torch.float32
        assert (got - want).norm() < 0.01 * want.norm()
    with fused.disable_adapter():  # peft's own forward: the base alone
        torch.testing.assert_close(fused.base_model.model.q(x), reference.base_model.model.q.base_layer(x))
    # An input changed in place between two projections is cast again, not served from the kept cast.
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        first = fused.base_model.model.q(x.detach().clone())
        changed = x.detach().clone()
        fused.base_model.model.q(changed)
        changed.mul_(2.0)
        torch.testing.assert_close(fused.base_model.model.q(changed), 2 * first, rtol=0.02, atol=0.02)


def test_kept_bfloat16_logits_give_the_backward_the_values_a_recomputation_gives(monkeypatch):
    generator = torch.Generator().manual_seed(4)
    hidden = torch.randn(21, 16, generator=generator, requires_grad=True)
    weight = torch.randn(40, 16, generator=generator)
    targets = torch.randint(0, 40, (21,), generator=generator)
    upstream = torch.randn(21, generator=generator)

    def gradient(kept_bytes: int) -> tuple[torch.Tensor, bool]:
        monkeypatch.setattr(chunked_logprobs, "KEPT_LOGITS_BYTES", kept_bytes)
        logprobs = chunked_token_logprobs(hidden, weight, targets, torch.bfloat16, chunk_rows=8)
        kept = logprobs.grad_fn.kept_logits is not None
        (grad,) = torch.autograd.grad((logprobs * upstream).sum(), hidden)
        return grad, kept

    recomputed, kept_none = gradient(0)
    reused, kept_all = gradient(1 << 30)
    assert (kept_none, kept_all) == (False, True)
    assert torch.equal(reused, recomputed)
    with torch.no_grad():  # nothing to keep without a backward
        assert chunked_token_logprobs(hidden, weight, targets, torch.bfloat16).grad_fn is None
