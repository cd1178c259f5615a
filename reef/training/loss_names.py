"""The losses a training job knows, by name, without importing torch: what a recipe's `loss_name` may be.

Built in: `sft`, `rl`, `grpo` (`losses`) and the teacher-pass losses `sdft`, `sdpo`, `opd`, `openclawrl`
(`distillation`, `hindsight`); or a `package.module:function` with the `losses.LossFn` signature.
"""

from __future__ import annotations

import importlib

PLAIN_LOSSES = frozenset({"sft", "rl", "grpo"})
DISTILLATION_LOSSES = frozenset({"sdft", "sdpo", "opd", "openclawrl"})  # openclawrl: `hindsight`
BUILTIN_LOSSES = PLAIN_LOSSES | DISTILLATION_LOSSES


def known_loss(name: str) -> bool:
    """Whether a training job can run loss `name`: a built-in one, or a `package.module:function` that imports
    and is callable (its module is imported to tell)."""
    if name in BUILTIN_LOSSES:
        return True
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        return False
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    return callable(getattr(module, attribute, None))


def unknown_loss_message(name: str) -> str:
    """Why `name` is no loss, with what is."""
    return f"unknown loss {name!r}: use one of {sorted(BUILTIN_LOSSES)} or 'package.module:function'"
