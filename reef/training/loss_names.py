"""The losses a training job knows, by name, without importing torch: what a recipe's `loss_name` may be.

Built in: `sft`, `rl`, `grpo` (`losses`) and the teacher-pass losses `sdft`, `sdpo`, `opd`, `openclawrl`
(`distillation`, `hindsight`); or a `package.module:function` with the `losses.LossFn` signature.
"""

from __future__ import annotations

import importlib

from pydantic import BaseModel

PLAIN_LOSSES = frozenset({"sft", "rl", "grpo"})
DISTILLATION_LOSSES = frozenset({"sdft", "sdpo", "opd", "openclawrl"})  # openclawrl: `hindsight`
BUILTIN_LOSSES = PLAIN_LOSSES | DISTILLATION_LOSSES

# The recipe configuration fields each built-in loss reads (`losses.ClipRange`, `distillation.DistillationTerms`,
# `hindsight.HindsightTerms`, and the teacher's `teacher` and `ema_rate`).
CLIP_RANGE = frozenset({"clip_low", "clip_high"})
TEACHER_PASS = frozenset(
    {"divergence", "top_k", "jsd_beta", "importance_cap", "skip_first_tokens", "teacher", "ema_rate"}
)
LOSS_SETTINGS: dict[str, frozenset[str]] = {
    "sft": frozenset(),
    "rl": CLIP_RANGE,
    "grpo": CLIP_RANGE,
    "sdft": TEACHER_PASS,
    "sdpo": TEACHER_PASS,
    "opd": TEACHER_PASS,
    "openclawrl": TEACHER_PASS | CLIP_RANGE | {"w_rl", "w_opd"},
}


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


def missing_settings(name: str, config_model: type[BaseModel] | None) -> list[str]:
    """The recipe configuration fields built-in loss `name` reads that `config_model` does not declare (every one
    for a recipe without a model); none for a `package.module:function` loss, which reads what it likes."""
    declared = set(config_model.model_fields) if config_model is not None else set()
    return sorted(LOSS_SETTINGS.get(name, frozenset()) - declared)
