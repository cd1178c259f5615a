"""The names of the built-in training losses, importable without torch: `reef serve` checks a weights recipe's
`loss_name` against them (or imports its `package.module:function`) before anything loads."""

from __future__ import annotations

BUILTIN_LOSS_NAMES = frozenset({"sft", "rl", "grpo", "sdft", "sdpo", "opd", "openclawrl"})
