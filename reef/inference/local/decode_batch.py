"""The rows that decode together under one adapter, in one of two forms with the same three operations.

`add(rows)` prefills new rows' prompts and appends them (returning their next-token logits), `decode()` feeds
every row its last token (returning the logits after it), `keep(indices)` drops the rows that finished. A row's
next input is always `rows[i].completion_ids[-1]`.

- `SlotBatch` runs a `SlotForward`: the compact Llama forward (`reef.inference.local.llama`: keys and values in
  preallocated slots, written in place) or the llama.cpp one (`reef.inference.local.llamacpp`: one llama.cpp
  sequence per row); the adapter as LoRA factors read from peft.
- `DecodeBatch` runs any transformers model (with the adapter selected in peft) on one left-padded
  `DynamicCache` and its attention mask: new rows' caches are padded on the left and stacked onto the running
  one, columns that became padding for every row are trimmed, and positions come from the mask, so padding never
  shifts a row's rotary positions.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from reef.inference.local.adapters import AdapterSet
from reef.inference.local.llama import LoraWeights


class SlotForward(Protocol):
    """What `SlotBatch` needs of a forward: a per-batch row cache, prefill, decode, and scoring for `score`."""

    precision: str  # as records name it (`training.precision`)
    device: Any

    def new_cache(self) -> Any: ...

    def release(self, cache: Any) -> None: ...

    def prefill(self, cache: Any, prompts: list[list[int]], pad_id: int, lora: LoraWeights | None) -> torch.Tensor: ...

    def decode(self, cache: Any, last: torch.Tensor, lora: LoraWeights | None) -> torch.Tensor: ...

    def score(self, prompt_ids: list[int], completion_ids: list[int], lora: LoraWeights | None) -> torch.Tensor: ...

    def close(self) -> None: ...


class Batch:
    """Rows that decode together under one adapter (`adapter` None = the base weights)."""

    def __init__(self, adapters: AdapterSet, adapter: str | None, pad_id: int) -> None:
        self.rows: list[Any] = []
        self._adapters, self._adapter, self._pad_id = adapters, adapter, pad_id

    def __len__(self) -> int:
        return len(self.rows)

    def _last(self, device: Any) -> torch.Tensor:
        return torch.tensor([row.completion_ids[-1] for row in self.rows], dtype=torch.long, device=device)

    def add(self, rows: list[Any]) -> torch.Tensor:
        raise NotImplementedError

    def decode(self) -> torch.Tensor:
        raise NotImplementedError

    def keep(self, keep: list[int]) -> None:
        raise NotImplementedError


class SlotBatch(Batch):
    """Rows on a `SlotForward`; see the module docstring."""

    def __init__(self, forward: SlotForward, adapters: AdapterSet, adapter: str | None, pad_id: int) -> None:
        super().__init__(adapters, adapter, pad_id)
        self._forward = forward
        self._cache: Any = None  # taken when the first rows arrive, given back when the last leave

    def add(self, rows: list[Any]) -> torch.Tensor:
        lora = self._adapters.lora(self._adapter)
        if self._cache is None:
            self._cache = self._forward.new_cache()
        cache, before = self._cache, self._cache.rows
        try:
            logits = self._forward.prefill(cache, [row.prompt_ids for row in rows], self._pad_id, lora)
        except BaseException:
            cache.keep(list(range(before)))  # the running rows stay as they were
            raise
        for row in rows:
            row.precision = self._forward.precision
        self.rows.extend(rows)
        return logits

    def decode(self) -> torch.Tensor:
        assert self._cache is not None
        return self._forward.decode(self._cache, self._last(self._forward.device), self._adapters.lora(self._adapter))

    def keep(self, keep: list[int]) -> None:
        if not keep:
            if self._cache is not None:
                self._forward.release(self._cache)  # the next batch reuses its memory
            self._cache = None
            self.rows = []
        elif len(keep) != len(self.rows):
            assert self._cache is not None
            self._cache.keep(keep)
            self.rows = [self.rows[i] for i in keep]


class DecodeBatch(Batch):
    """Rows on the transformers model; see the module docstring."""

    def __init__(self, adapters: AdapterSet, adapter: str | None, pad_id: int) -> None:
        super().__init__(adapters, adapter, pad_id)
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # [rows, cached length], 1 = a real token

    def add(self, rows: list[Any]) -> torch.Tensor:
        with self._adapters.selected(self._adapter):
            logits, cache, mask = self.prefill(self._adapters.model, [row.prompt_ids for row in rows], self._pad_id)
        self.join(rows, cache, mask)
        for row in rows:
            row.precision = str(self._adapters.model.dtype).removeprefix("torch.")
        return logits

    @staticmethod
    def prefill(model: Any, prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
        """Run the prompts (left-padded) through `model`; return last-position logits, their cache and mask."""
        device = model.device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        # Every layer keeps its whole history, sliding-window ones included (the mask windows them): rows are padded,
        # stacked and trimmed along the length, which a sliding layer's own count of tokens seen would not follow.
        cache = DynamicCache()
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{_cache_keyword(model): cache},
        )
        return out.logits[:, -1, :], cache, mask

    def join(self, rows: list[Any], cache: DynamicCache, mask: torch.Tensor) -> None:
        """Stack prefilled rows onto the running ones, padding whichever cache is shorter on the left."""
        if self.cache is None or self.mask is None or not self.rows:
            self.rows, self.cache, self.mask = list(rows), cache, mask
            return
        width = max(self.mask.shape[1], mask.shape[1])
        layers: list[Any] = list(self.cache.layers)
        theirs_layers: list[Any] = list(cache.layers)
        for mine, theirs in zip(layers, theirs_layers, strict=True):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)], dim=0)
            mine.values = torch.cat([_pad_left(mine.values, width), _pad_left(theirs.values, width)], dim=0)
        self.mask = torch.cat([_pad_left(self.mask, width), _pad_left(mask, width)], dim=0)
        self.rows.extend(rows)

    def decode(self) -> torch.Tensor:
        assert self.mask is not None
        model = self._adapters.model
        positions = self.mask.sum(dim=1, keepdim=True)
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        with self._adapters.selected(self._adapter):
            out = model(
                input_ids=self._last(self.mask.device).unsqueeze(1),
                attention_mask=self.mask,
                position_ids=positions,
                use_cache=True,
                **{_cache_keyword(model): self.cache},
            )
        return out.logits[:, -1, :]

    def keep(self, keep: list[int]) -> None:
        """Keep only rows at indices `keep` (in order); trim columns that are padding for every kept row."""
        if len(keep) == len(self.rows):
            return
        if not keep:
            self.rows, self.cache, self.mask = [], None, None
            return
        assert self.cache is not None and self.mask is not None
        index = torch.tensor(keep, dtype=torch.long, device=self.mask.device)
        self.mask = self.mask.index_select(0, index)
        self.rows = [self.rows[i] for i in keep]
        start = int(self.mask.any(dim=0).int().argmax())  # first column some row still uses
        self.mask = self.mask[:, start:]
        layer: Any
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, start:, :]
            layer.values = layer.values.index_select(0, index)[:, :, start:, :]


_CACHE_KEYWORDS: dict[type, str] = {}


def _cache_keyword(model: Any) -> str:
    # transformers 5.x renamed `past_key_values` to `cache`; older releases only know the former.
    kind = type(model)
    if kind not in _CACHE_KEYWORDS:
        known = inspect.signature(kind.forward).parameters
        _CACHE_KEYWORDS[kind] = "cache" if "cache" in known else "past_key_values"
    return _CACHE_KEYWORDS[kind]


def _pad_left(tensor: torch.Tensor, width: int) -> torch.Tensor:
    # Works for masks [rows, length] and cache tensors [rows, heads, length, dim]: length is dim 1 or -2.
    dim = 1 if tensor.dim() == 2 else -2
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)
