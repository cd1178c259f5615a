"""The training step's compute precision (`training.compute_dtype`): fp32, or bfloat16 matmuls over fp32 weights.

With bfloat16 the frozen base weights and the trainable (fp32, master) adapter weights stay as loaded; the
forward runs under `torch.autocast`, so the matmuls take bfloat16 inputs (this CPU's AMX; CUDA's tensor cores)
while norms, softmax and the residual stream stay fp32.

Two details keep the adapter's update visible. A LoRA layer's output is W x + s·B A x, and W x comes out of a
bfloat16 matmul already on the bfloat16 grid: summed in bfloat16, an adapter delta under half a grid step
(8 bits of mantissa) rounds away entirely, which biases a fresh adapter's steps towards zero. The base output
is upcast before the sum. Then the values (v_proj) would meet the same grid again where attention casts its
inputs to bfloat16, so attention runs in fp32 (it is a small share of the FLOPs at these lengths). Measured on
four demonstrations, rank 8: the loss after one step is 1.749 in fp32, 2.025 with plain autocast, 1.774 with
the upcast sums, 1.754 with fp32 attention too. A plain LoRA projection does all of this in one autograd function
(`fused_lora`), which also casts each block input once instead of twice per projection.

The frozen projections' weights are stored in bfloat16 once (`store_frozen_weights`): autocast would otherwise
cast every one of them from fp32 again in every forward (it caches casts only of weights that train), and the
cast is what it multiplies anyway, so the step computes the same values with less memory traffic. The embeddings
(the output projection's weights, when tied) and the norms stay fp32.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from reef.inference.local.llama import bfloat16_supported
from reef.training.fused_lora import fuse_lora_projections

FP32_ATTENTION = "reef_sdpa_fp32"
COMPUTE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_compute_dtype(setting: str, device: str, full_finetune: bool = False) -> torch.dtype:
    """`float32` or `bfloat16` as named; `auto`: bfloat16 on CUDA or where the CPU has AMX or AVX-512 BF16, for a
    LoRA step. A full fine-tune stays fp32 under `auto`: its forward would see each small update to a weight only
    as an occasional whole bfloat16 step, and its loss curve was not checked against fp32's (a LoRA's was)."""
    if setting != "auto":
        return COMPUTE_DTYPES[setting]
    if not full_finetune and (device == "cuda" or bfloat16_supported()):
        return torch.bfloat16
    return torch.float32


def compute_context(dtype: torch.dtype, device: str) -> contextlib.AbstractContextManager[Any]:
    """Autocast to `dtype` on `device` for a forward pass, or nothing for fp32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device, dtype=dtype)


def keep_adapter_deltas_fp32(model: Any) -> None:
    """Make `model`'s LoRA layers sum W x + s·B A x in fp32 and its attention run in fp32 (the module docstring):
    a plain LoRA projection through `fused_lora` (one function, fp32 sum), any other through peft's forward with
    its base output upcast."""
    from peft.tuners.lora import LoraLayer
    from transformers import AttentionInterface

    for module in model.modules():
        if isinstance(module, LoraLayer):
            module.base_layer.register_forward_hook(_upcast_output)
    fuse_lora_projections(model)
    AttentionInterface.register(FP32_ATTENTION, _fp32_sdpa)
    model.set_attn_implementation(FP32_ATTENTION)


def store_frozen_weights(model: Any, dtype: torch.dtype) -> int:
    """Store the weights of `model`'s frozen linear layers (not its output projection) in `dtype`, as autocast
    would cast them in each forward; returns how many. Only for a model that runs under `compute_context(dtype)`."""
    head = model.get_output_embeddings()
    converted = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear and module is not head and not module.weight.requires_grad:
            module.weight.data = module.weight.data.to(dtype)
            converted += 1
    return converted


def _upcast_output(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.float()


def _fp32_sdpa(
    module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any
) -> tuple[torch.Tensor, Any]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    with torch.autocast(query.device.type, enabled=False):
        return sdpa_attention_forward(module, query.float(), key.float(), value.float(), *args, **kwargs)
