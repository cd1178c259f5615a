"""A LoRA projection's forward and backward in one autograd function, for the bfloat16 training step.

For an input x `[N, in]`, the frozen base weight W `[out, in]`, the adapter A `[r, in]`, B `[out, r]` and its
scale s, a LoRA projection is

    y = W x + s · B (A x)

and for an upstream gradient g = ∂L/∂y `[N, out]`, with d = A x `[N, r]` and e = s · g B `[N, r]`:

    ∂L/∂x = g W + e A,      ∂L/∂A = eᵀ x,      ∂L/∂B = s · gᵀ d      (W is frozen: no ∂L/∂W)

Under plain autocast, peft's LoRA layer computes this as five separate operations and their backward nodes: x
cast to bfloat16 twice (once for W, once for A), W x rounded to bfloat16 and upcast (`precision`'s hook), B d
rounded to bfloat16, scaled and added. Here:

- x is cast to bfloat16 once, and kept for the next projection that reads the same tensor (q, k and v read the
  same normed input; gate and up another), so a block casts each input once and saves one copy for backward;
- W x and d = A x run in bfloat16 (the two large matmuls' inputs, as autocast would give them); W x is upcast to
  fp32 and s · B d is accumulated into it by one fp32 `addmm_` (B stays fp32), so the adapter's delta is never
  rounded to bfloat16 on its way into the sum (what `precision`'s upcast exists for);
- the backward's two large products (g W, eᵀ x) run in bfloat16; the rank-r ones (e = s · g B, gᵀ d, e A) in
  fp32, where they are cheap.

The values agree with peft's path under autocast to bfloat16 rounding (a test checks the gradients against an
fp32 computation and a few training steps against the fp32 path). Anything else (adapters disabled or merged,
several active adapters, dropout, DoRA or another variant, a bias, no autocast) runs peft's own forward.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

import torch

from reef.training.chunked_logprobs import kept_cast


class FusedLoraProjection(torch.autograd.Function):
    """y = W x + s · B A x `[..., out]` from x `[..., in]` (the math: module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        lora_a: torch.Tensor,
        lora_b: torch.Tensor,
        scale: float,
        compute_dtype: torch.dtype,
    ) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):  # the dtypes here are explicit
            x_c = _cast_input(x, compute_dtype).reshape(-1, x.shape[-1])
            weight_c = kept_cast(weight, compute_dtype)
            a_c = lora_a.to(compute_dtype)
            y = (x_c @ weight_c.T).float()
            down = (x_c @ a_c.T).float()
            y.addmm_(down, lora_b.T, alpha=scale)
        ctx.save_for_backward(x_c, weight_c, a_c, down, lora_b)
        ctx.scale, ctx.compute_dtype, ctx.input_dtype = scale, compute_dtype, x.dtype
        return y.view(*x.shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x_c, weight_c, a_c, down, lora_b = ctx.saved_tensors
        grad = grad_y.reshape(-1, grad_y.shape[-1]).float()
        grad_a = grad_b = grad_x = None
        grad_down = (grad @ lora_b).mul_(ctx.scale)  # e = s · g B, fp32 [N, r]
        if ctx.needs_input_grad[0]:
            grad_x = (grad.to(ctx.compute_dtype) @ weight_c).float()
            grad_x.addmm_(grad_down, a_c.float())
            grad_x = grad_x.to(ctx.input_dtype).view(*grad_y.shape[:-1], -1)
        if ctx.needs_input_grad[2]:
            grad_a = (grad_down.T.to(ctx.compute_dtype) @ x_c).float()
        if ctx.needs_input_grad[3]:
            grad_b = (grad.T @ down).mul_(ctx.scale)
        return grad_x, None, grad_a, grad_b, None, None


def fuse_lora_projections(model: Any) -> int:
    """Run `model`'s LoRA linear layers through `FusedLoraProjection` where autocast is on and the layer is a
    plain single-adapter LoRA (otherwise peft's forward, unchanged); returns how many layers."""
    from peft.tuners.lora import Linear

    fused = 0
    for module in model.modules():
        if type(module) is Linear:
            module.forward = types.MethodType(_fused_forward(module.forward), module)  # type: ignore[method-assign]
            fused += 1
    return fused


def _fused_forward(peft_forward: Any) -> Any:
    def forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        name = self.active_adapters[0] if len(self.active_adapters) == 1 else None
        if (
            name is None
            or args
            or kwargs
            or self.disable_adapters
            or self.merged
            or name not in self.lora_A
            or name in self.lora_variant
            or not isinstance(self.lora_dropout[name], torch.nn.Identity)
            or self.base_layer.bias is not None
            or not torch.is_autocast_enabled(x.device.type)
        ):
            return peft_forward(x, *args, **kwargs)
        compute_dtype = torch.get_autocast_dtype(x.device.type)
        weights = (self.base_layer.weight, self.lora_A[name].weight, self.lora_B[name].weight)
        y: torch.Tensor = FusedLoraProjection.apply(x, *weights, self.scaling[name], compute_dtype)
        return y

    return forward


_last_input: list[tuple[weakref.ref[torch.Tensor], int, torch.Tensor]] = []


def _cast_input(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`x.to(dtype)`, kept for the next call on the same live tensor at the same version (one slot: the
    projections that read one input run one after another)."""
    if x.dtype == dtype:
        return x
    if _last_input:
        ref, version, cast = _last_input[0]
        if ref() is x and version == x._version and cast.dtype == dtype:
            return cast
    cast = x.to(dtype)
    _last_input[:] = [(weakref.ref(x), x._version, cast)]
    return cast
