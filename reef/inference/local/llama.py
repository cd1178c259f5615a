"""A compact forward for Llama-family models (SmolLM2 among them), written for batched decoding on a CPU.

The math is transformers' `LlamaForCausalLM` (RMSNorm, rotary positions, grouped-query attention, SwiGLU), with
what a decode step does not need taken out: q/k/v and gate/up are each one matmul on a fused weight, rows keep
their keys and values in preallocated slots (`SlotCache`) written in place instead of a cache concatenated anew
every step, and LoRA adapters are two small matmuls per projection, read from the adapter peft loaded.

Precision (`dtype`): `float32` is the transformers model's own arithmetic. `bfloat16` rounds the weights to
bfloat16 and runs every matmul (the output projection included) as a oneDNN bfloat16 matmul on weights packed once
for this CPU (AMX / AVX-512 BF16), while the residual stream, norms, rotary positions, attention and the LoRA
terms stay float32; the logits come out of a bfloat16 matmul. On the 2-core AMX machine this made this forward's
decode step 1.5× (one row) to 2.6× (16 rows) faster than with its float32 matmuls, which were already faster than
transformers' forward (benchmarks/local_engine.py, docs/results/2026-12-05-engine-speed.md). The log-probs
recorded are those of the weights that sampled: the record says which precision that was.
`supports(model)` says whether a model is one this forward reproduces; others keep the transformers path.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def supports(model: Any) -> bool:
    """True for a Llama model with no biases, default rotary positions and SiLU, which this forward reproduces."""
    config = model.config
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return (
        getattr(config, "model_type", None) == "llama"
        and not getattr(config, "attention_bias", False)
        and not getattr(config, "mlp_bias", False)
        and getattr(config, "hidden_act", None) == "silu"
        and rope.get("rope_type", "default") == "default"
        and hasattr(model, "model")
        and hasattr(model.model, "rotary_emb")
    )


def bfloat16_supported() -> bool:
    """True where this CPU runs bfloat16 matmuls natively (AMX or AVX-512 BF16) and oneDNN is there to use them.

    Elsewhere they would be emulated and slower than float32 (oneDNN's own `_is_mkldnn_bf16_supported` says yes
    on any AVX-512 CPU, emulated or not). The training step's `compute_dtype: auto` asks the same question."""
    cpu: Any = torch.cpu
    try:
        native = bool(cpu._is_amx_tile_supported() or cpu._is_avx512_bf16_supported())
    except AttributeError:  # an older torch without the probes: take the safe precision
        return False
    return native and torch.backends.mkldnn.is_available()


class _Linear:
    """x @ weightᵀ for float32 `x`, the weight in `dtype`: bfloat16 as a oneDNN matmul on a weight packed once
    where the CPU runs it natively, else a plain matmul in `dtype`; the result in float32."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype) -> None:
        self._packed: torch.Tensor | None = None
        self._weight: torch.Tensor | None = None
        if dtype == torch.bfloat16 and bfloat16_supported():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(torch.bfloat16), 1)
        else:
            self._weight = weight.detach().to(dtype).contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._weight is not None:
            return F.linear(x.to(self._weight.dtype), self._weight).float()
        out = torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self._packed, None, "none", [], "")
        return out.float()


@dataclasses.dataclass(slots=True)
class _Layer:
    input_norm: torch.Tensor
    qkv: _Linear  # [(heads + 2·kv_heads)·head_dim, hidden]
    o: _Linear
    post_norm: torch.Tensor
    gate_up: _Linear  # [2·intermediate, hidden]
    down: _Linear


@dataclasses.dataclass(frozen=True, slots=True)
class LoraWeights:
    """One adapter's low-rank factors: `layers[i][projection] = (A [r, in], B·scaling [out, r])`."""

    layers: tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], ...]


class SlotCache:
    """Keys and values of up to `rows` sequences, each in its own slot from position 0; grows by doubling.

    `lengths[i]` is how many positions slot i holds. Rows 0 … n−1 are the live ones: a row that leaves is
    replaced by the next live row (its slot copied), so a step always works on a prefix of the slots. Positions
    past a row's length hold stale (finite) values that attention masks out.
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: Any) -> None:
        self._shape = (layers, kv_heads, head_dim)
        self._dtype, self._device = dtype, device
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.lengths = torch.zeros(0, dtype=torch.long, device=device)
        self._allocate(4, 128)

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def capacity(self) -> int:
        """Positions allocated in all (rows × positions)."""
        rows, _, positions, _ = self.keys[0].shape
        return int(rows * positions)

    def _allocate(self, rows: int, positions: int) -> None:
        layers, kv_heads, head_dim = self._shape
        keys, values = [], []
        for layer in range(layers):
            k = torch.zeros((rows, kv_heads, positions, head_dim), dtype=self._dtype, device=self._device)
            v = torch.zeros_like(k)
            if self.keys:
                old_rows, _, old_positions, _ = self.keys[layer].shape
                r, p = min(rows, old_rows), min(positions, old_positions)
                k[:r, :, :p] = self.keys[layer][:r, :, :p]
                v[:r, :, :p] = self.values[layer][:r, :, :p]
            keys.append(k)
            values.append(v)
        self.keys, self.values = keys, values

    def reserve(self, rows: int, positions: int) -> None:
        """Make room for `rows` slots of `positions` positions each (capacity at least doubles when it grows)."""
        have_rows, _, have_positions, _ = self.keys[0].shape
        if rows > have_rows or positions > have_positions:
            self._allocate(
                max(rows, have_rows * 2 if rows > have_rows else have_rows),
                max(positions, have_positions * 2 if positions > have_positions else have_positions),
            )

    def add(self, lengths: list[int]) -> None:
        """Append slots for new rows holding `lengths` positions (their keys and values are written by a forward)."""
        new = torch.tensor(lengths, dtype=torch.long, device=self._device)
        self.reserve(self.rows + len(lengths), int(max(lengths)) + 1)
        self.lengths = torch.cat([self.lengths, new])

    def keep(self, keep: list[int]) -> None:
        """Keep rows `keep` (increasing indices) as rows 0 … len(keep)−1, moving each into its new slot."""
        for target, source in enumerate(keep):
            if target != source:
                length = int(self.lengths[source])
                for k, v in zip(self.keys, self.values, strict=True):
                    k[target, :, :length] = k[source, :, :length]
                    v[target, :, :length] = v[source, :, :length]
        index = torch.tensor(keep, dtype=torch.long, device=self._device)
        self.lengths = self.lengths.index_select(0, index)


class LlamaForward:
    """Prefill and decode steps of a `LlamaForCausalLM` on fused weights; see the module docstring."""

    def __init__(self, model: Any, dtype: torch.dtype = torch.float32) -> None:
        config = model.config
        self.hidden = int(config.hidden_size)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or self.hidden // self.heads)
        self.intermediate = int(config.intermediate_size)
        self.eps = float(config.rms_norm_eps)
        inner = model.model
        self.embed = inner.embed_tokens.weight.detach().float()
        self.final_norm = inner.norm.weight.detach().float()
        self.lm_head = _Linear(model.lm_head.weight, dtype)
        rotary = inner.rotary_emb
        self._inv_freq = rotary.inv_freq.float()
        self._rope_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.layers = [_fuse(layer, dtype) for layer in inner.layers]
        self._spare: SlotCache | None = None
        self.dtype = dtype
        self.precision = str(dtype).removeprefix("torch.")  # as records name it
        self.device = self.embed.device

    def new_cache(self) -> SlotCache:
        """An empty cache: the one last given back with `release` if any (its memory is reused), else a new one."""
        if self._spare is not None:
            cache, self._spare = self._spare, None
            return cache
        return SlotCache(len(self.layers), self.kv_heads, self.head_dim, torch.float32, self.device)

    def release(self, cache: SlotCache) -> None:
        """Keep an emptied cache for the next `new_cache` (one is kept: the larger)."""
        cache.keep([])
        if self._spare is None or cache.capacity > self._spare.capacity:
            self._spare = cache

    def prefill(
        self, cache: SlotCache, prompts: list[list[int]], pad_id: int, lora: LoraWeights | None
    ) -> torch.Tensor:
        """Add `prompts` to `cache` as new rows (right-padded, causal); return their last positions' logits."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, : len(prompt)] = torch.tensor(prompt, dtype=torch.long)
        first = cache.rows
        cache.add([len(p) for p in prompts])
        positions = torch.arange(width).expand(len(prompts), width)
        rows = slice(first, first + len(prompts))
        hidden = self._layers(ids.to(self.device), positions.to(self.device), cache, rows, None, lora)
        last = torch.tensor([len(p) - 1 for p in prompts], device=self.device)
        return self._logits(hidden[torch.arange(len(prompts), device=self.device), last])

    def decode(self, cache: SlotCache, last: torch.Tensor, lora: LoraWeights | None) -> torch.Tensor:
        """Feed each live row its next token `last` ([rows]); return the logits after it ([rows, vocab])."""
        positions = cache.lengths.clone()
        cache.reserve(cache.rows, int(positions.max()) + 1)
        hidden = self._layers(last.unsqueeze(1), positions.unsqueeze(1), cache, slice(0, cache.rows), positions, lora)
        cache.lengths += 1
        return self._logits(hidden[:, 0])

    def score(self, prompt_ids: list[int], completion_ids: list[int], lora: LoraWeights | None) -> torch.Tensor:
        """Temperature-1 log-probs of `completion_ids` after `prompt_ids` ([len(completion)], float32)."""
        ids = prompt_ids + completion_ids[:-1]
        cache = self.new_cache()
        try:
            cache.add([len(ids)])
            positions = torch.arange(len(ids), device=self.device).unsqueeze(0)
            tensor = torch.tensor([ids], dtype=torch.long, device=self.device)
            hidden = self._layers(tensor, positions, cache, slice(0, 1), None, lora)[0, len(prompt_ids) - 1 :]
        finally:
            self.release(cache)  # the next batch reuses its memory
        logprobs = torch.log_softmax(self._logits(hidden), dim=-1)
        targets = torch.tensor(completion_ids, dtype=torch.long, device=self.device).unsqueeze(1)
        return logprobs.gather(1, targets).squeeze(1)

    def close(self) -> None:
        """Nothing to free beyond what Python's collector frees."""

    def _layers(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: SlotCache,
        rows: slice,
        decode_at: torch.Tensor | None,
        lora: LoraWeights | None,
    ) -> torch.Tensor:
        batch, steps = ids.shape
        hidden = F.embedding(ids, self.embed)
        cos, sin = self._rotary(positions)
        heads, kv_heads, head_dim = self.heads, self.kv_heads, self.head_dim
        q_size, kv_size = heads * head_dim, kv_heads * head_dim
        if decode_at is not None:
            row_index = torch.arange(batch, device=self.device)
            span = int(decode_at.max()) + 1
            mask = (torch.arange(span, device=self.device) <= decode_at.unsqueeze(1)).view(batch, 1, 1, span)
        for index, layer in enumerate(self.layers):
            adapter = lora.layers[index] if lora is not None else None
            x = _rms_norm(hidden, layer.input_norm, self.eps)
            qkv = _project(
                x,
                layer.qkv,
                adapter,
                (("q_proj", 0, q_size), ("k_proj", q_size, kv_size), ("v_proj", q_size + kv_size, kv_size)),
            )
            q = qkv[..., :q_size].view(batch, steps, heads, head_dim).transpose(1, 2)
            k = qkv[..., q_size : q_size + kv_size].view(batch, steps, kv_heads, head_dim).transpose(1, 2)
            v = qkv[..., q_size + kv_size :].view(batch, steps, kv_heads, head_dim).transpose(1, 2)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            keys, values = cache.keys[index], cache.values[index]
            if decode_at is None:
                keys[rows, :, :steps] = k
                values[rows, :, :steps] = v
                attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                attended = attended.transpose(1, 2).reshape(batch, steps, q_size)
            else:
                keys[row_index, :, decode_at] = k[:, :, 0]
                values[row_index, :, decode_at] = v[:, :, 0]
                # One query per row: the query heads that share a key head attend as that head's "positions"
                # (head h uses key head h // group), so keys and values are never repeated per query head.
                grouped = q.reshape(batch, kv_heads, heads // kv_heads, head_dim)
                attended = F.scaled_dot_product_attention(
                    grouped, keys[rows, :, :span], values[rows, :, :span], attn_mask=mask
                ).reshape(batch, steps, q_size)
            hidden = hidden + _project(attended, layer.o, adapter, (("o_proj", 0, self.hidden),))
            x = _rms_norm(hidden, layer.post_norm, self.eps)
            gate_up = _project(
                x,
                layer.gate_up,
                adapter,
                (("gate_proj", 0, self.intermediate), ("up_proj", self.intermediate, self.intermediate)),
            )
            mixed = F.silu(gate_up[..., : self.intermediate]) * gate_up[..., self.intermediate :]
            hidden = hidden + _project(mixed, layer.down, adapter, (("down_proj", 0, self.hidden),))
        return hidden

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(_rms_norm(hidden, self.final_norm, self.eps))

    def _rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # As transformers' LlamaRotaryEmbedding: angles in fp32, cos/sin scaled, then cast to the model's dtype.
        angles = positions.unsqueeze(-1).float() * self._inv_freq
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos() * self._rope_scale, emb.sin() * self._rope_scale
        return cos.unsqueeze(1), sin.unsqueeze(1)


def lora_of(peft_model: Any, name: str, layers: int) -> LoraWeights | None:
    """Adapter `name`'s factors as `LoraWeights`, or None when it uses what this forward does not do (DoRA, …)."""
    found: list[dict[str, tuple[torch.Tensor, torch.Tensor]]] = [{} for _ in range(layers)]
    for module_name, module in peft_model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if lora_a is None or name not in lora_a:
            continue
        parts = module_name.split(".")
        projection = parts[-1]
        if projection not in PROJECTIONS or "layers" not in parts:
            return None
        if getattr(module, "use_dora", {}).get(name) or getattr(module, "lora_bias", {}).get(name):
            return None
        layer = int(parts[parts.index("layers") + 1])
        a = module.lora_A[name].weight.detach()
        b = module.lora_B[name].weight.detach() * float(module.scaling[name])
        found[layer][projection] = (a, b)
    return LoraWeights(tuple(found))


def _fuse(layer: Any, dtype: torch.dtype) -> _Layer:
    attention, mlp = layer.self_attn, layer.mlp

    def linear(*modules: Any) -> _Linear:
        # peft wraps an adapted projection: its own weight is the wrapped base layer's.
        weights = [getattr(m, "base_layer", m).weight.detach() for m in modules]
        return _Linear(torch.cat(weights, dim=0), dtype)

    return _Layer(
        input_norm=layer.input_layernorm.weight.detach().float(),
        qkv=linear(attention.q_proj, attention.k_proj, attention.v_proj),
        o=linear(attention.o_proj),
        post_norm=layer.post_attention_layernorm.weight.detach().float(),
        gate_up=linear(mlp.gate_proj, mlp.up_proj),
        down=linear(mlp.down_proj),
    )


def _project(
    x: torch.Tensor,
    weight: _Linear,
    adapter: dict[str, tuple[torch.Tensor, torch.Tensor]] | None,
    parts: tuple[tuple[str, int, int], ...],
) -> torch.Tensor:
    """x @ weightᵀ, plus each adapted part's (x @ Aᵀ) @ (B·s)ᵀ added into its slice of the output columns."""
    out = weight(x)
    if adapter:
        for projection, start, size in parts:
            factors = adapter.get(projection)
            if factors is not None:
                a, b = factors
                out[..., start : start + size] += F.linear(F.linear(x, a), b)
    return out


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # As transformers' LlamaRMSNorm, all in float32 (the residual stream is float32 here).
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
