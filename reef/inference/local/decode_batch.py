"""The rows that decode together under one adapter: one left-padded KV cache and its attention mask.

Requests join between decode steps (their prompts are prefilled together, then their cache is padded on the left
and stacked onto the running one) and leave as soon as they finish (their rows are dropped, and columns that
became padding for every row are trimmed). Positions come from the mask, so padding never shifts a row's RoPE.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import DynamicCache


class DecodeBatch:
    """One adapter group's running rows (`rows[i]` owns row i of the cache, `mask` and `last`)."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None  # [rows, cached length], 1 = a real token
        self.last: torch.Tensor | None = None  # [rows] the token each row feeds next

    def __len__(self) -> int:
        return len(self.rows)

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
        cache = DynamicCache(config=model.config)
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{_cache_keyword(model): cache},
        )
        return out.logits[:, -1, :], cache, mask

    def join(self, rows: list[Any], cache: DynamicCache, mask: torch.Tensor, last: list[int]) -> None:
        """Stack prefilled rows onto the running ones, padding whichever cache is shorter on the left."""
        last_tensor = torch.tensor(last, dtype=torch.long, device=mask.device)
        if self.cache is None or self.mask is None or self.last is None or not self.rows:
            self.rows, self.cache, self.mask, self.last = list(rows), cache, mask, last_tensor
            return
        width = max(self.mask.shape[1], mask.shape[1])
        layers: list[Any] = list(self.cache.layers)
        theirs_layers: list[Any] = list(cache.layers)
        for mine, theirs in zip(layers, theirs_layers, strict=True):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)], dim=0)
            mine.values = torch.cat([_pad_left(mine.values, width), _pad_left(theirs.values, width)], dim=0)
        self.mask = torch.cat([_pad_left(self.mask, width), _pad_left(mask, width)], dim=0)
        self.last = torch.cat([self.last, last_tensor])
        self.rows.extend(rows)

    def decode(self, model: Any) -> torch.Tensor:
        """One decode step for every row: feed `last`, return the next-token logits [rows, vocab]."""
        assert self.mask is not None and self.last is not None
        positions = self.mask.sum(dim=1, keepdim=True)
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        out = model(
            input_ids=self.last.unsqueeze(1),
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
            self.rows, self.cache, self.mask, self.last = [], None, None, None
            return
        assert self.cache is not None and self.mask is not None and self.last is not None
        index = torch.tensor(keep, dtype=torch.long, device=self.mask.device)
        self.mask = self.mask.index_select(0, index)
        self.last = self.last.index_select(0, index)
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
