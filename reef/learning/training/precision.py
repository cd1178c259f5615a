"""The training step's compute precision (`training.compute_dtype`): fp32, or bfloat16 matmuls over fp32 weights.

With bfloat16 the frozen base weights and the trainable (fp32, master) adapter weights stay as loaded; the
forward runs under `torch.autocast`, so the matmuls take bfloat16 inputs (this CPU's AMX; CUDA's tensor cores)
while norms, softmax and the residual stream stay fp32. One detail keeps the adapter's update visible: a LoRA
layer's output is W x + s·B A x, and W x comes out of a bfloat16 matmul already on the bfloat16 grid; summed in
bfloat16, an adapter delta under half a grid step (8 bits of mantissa) rounds away entirely, which biases a
fresh adapter's steps towards zero (measured: after one step the loss a bfloat16 forward sees had kept 73% of
the fp32 decrease). `keep_adapter_sums_fp32` upcasts W x before the sum, so the delta survives.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

COMPUTE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_compute_dtype(setting: str, device: str) -> torch.dtype:
    """`float32` or `bfloat16` as named; `auto`: bfloat16 on CUDA or where the CPU has AMX or AVX-512 BF16."""
    if setting != "auto":
        return COMPUTE_DTYPES[setting]
    if device == "cuda" or _cpu_has_fast_bfloat16():
        return torch.bfloat16
    return torch.float32


def _cpu_has_fast_bfloat16() -> bool:
    cpu: Any = torch.cpu
    try:
        return bool(cpu._is_amx_tile_supported() or cpu._is_avx512_bf16_supported())
    except AttributeError:  # an older torch without the probes: take the safe precision
        return False


def compute_context(dtype: torch.dtype, device: str) -> contextlib.AbstractContextManager[Any]:
    """Autocast to `dtype` on `device` for a forward pass, or nothing for fp32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device, dtype=dtype)


def keep_adapter_sums_fp32(model: Any) -> list[Any]:
    """Make each LoRA layer's frozen base projection return fp32, so W x + s·B A x is summed in fp32 (see the
    module docstring). Returns the hook handles."""
    from peft.tuners.lora import LoraLayer

    return [
        module.base_layer.register_forward_hook(_upcast_output)
        for module in model.modules()
        if isinstance(module, LoraLayer)
    ]


def _upcast_output(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.float()
