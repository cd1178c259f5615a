"""The teacher pass: a teacher's next-token logits at each of the student's completion positions.

The student's completion ids are appended verbatim to the teacher's own prompt (the student's messages plus a
context block), so position j of both `[B, C, V]` tensors predicts completion token j. Teachers:

- `SelfTeacher`: the student's base model with the adapter disabled (peft `disable_adapter`), frozen.
- `EmaTeacher`: the policy adapter's exponential moving average, swapped into the adapter's weights for the pass
  and swapped back; `update` folds the new weights in after each optimizer step (θ_ema ← (1 − ρ)·θ_ema + ρ·θ).
  It starts from the parent release's `ema/` adapter, or from the parent's own weights, and is saved to `ema/`.
- `ModelTeacher`: a separate frozen model: a full model directory, or the base with another release's adapter merged.
"""

from __future__ import annotations

import abc
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from reef.training.chunked_logprobs import body_and_head
from reef.training.jobfile import JobTeacher, TrainingJob
from reef.training.teacher_spec import EMA_DIR

Rows = list[tuple[list[int], list[int]]]  # (prompt ids, completion ids) per sample


def completion_logits(model: Any, rows: Rows, pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits `[B, C, V]` at the completion positions, mask `[B, C]`), C the longest completion; one forward pass.

    Row b, position j holds the logits that predict completion token j of row b (read at sequence index p_b − 1 + j).
    Where the head allows (`body_and_head`), only those positions go through the output projection: a teacher's
    prompt carries its context block, so most positions are prompt, and the full `[B, L, V]` logits (and, for the
    student, their gradient) cost more than the rest of the head's work.
    """
    length = max(len(prompt) + len(completion) for prompt, completion in rows)
    width = max(len(completion) for _, completion in rows)
    input_ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
    index = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width))
    for row, (prompt, completion) in enumerate(rows):
        tokens = prompt + completion
        input_ids[row, : len(tokens)] = torch.tensor(tokens)
        attention_mask[row, : len(tokens)] = 1
        index[row, : len(completion)] = torch.arange(len(prompt) - 1, len(tokens) - 1)
        mask[row, : len(completion)] = 1
    input_ids, attention_mask, index = input_ids.to(device), attention_mask.to(device), index.to(device)
    parts = body_and_head(model)
    if parts is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits.gather(1, index.unsqueeze(-1).expand(-1, -1, logits.shape[-1])).float(), mask.to(device)
    body, head = parts
    hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return head(hidden.gather(1, index.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))).float(), mask.to(device)


class Teacher(abc.ABC):
    """Gives teacher logits over completions; holds no gradient."""

    kind: str

    @abc.abstractmethod
    def logits(self, model: Any, rows: Rows, pad_id: int, device: str) -> torch.Tensor:
        """Teacher logits `[B, C, V]` for `rows` (the teacher's prompts with the student's completions)."""

    def update(self, model: Any) -> None:  # noqa: B027 - only the EMA teacher moves
        """Called after each optimizer step of the student."""

    def save(self, output_dir: Path) -> None:  # noqa: B027 - only the EMA teacher is kept with the release
        """Write whatever the release must carry for the next step's teacher."""


class SelfTeacher(Teacher):
    kind = "self"

    def logits(self, model: Any, rows: Rows, pad_id: int, device: str) -> torch.Tensor:
        with torch.no_grad(), model.disable_adapter():
            return completion_logits(model, rows, pad_id, device)[0]


class EmaTeacher(Teacher):
    """The EMA of the trainable adapter weights (peft's saved-state names), at rate ρ per optimizer step."""

    kind = "ema"

    def __init__(self, model: Any, parent_dir: Path | None, rate: float) -> None:
        from peft import get_peft_model_state_dict

        if not 0.0 < rate <= 1.0:
            raise ValueError(f"ema_rate must lie in (0, 1], not {rate}")
        self.rate = rate
        live = get_peft_model_state_dict(model)
        saved = parent_dir / EMA_DIR / "adapter_model.safetensors" if parent_dir is not None else None
        if saved is not None and saved.exists():
            from safetensors.torch import load_file

            loaded = load_file(str(saved))
            self.weights = {
                name: loaded[name].to(live[name]) if name in loaded else live[name].clone() for name in live
            }
        else:
            self.weights = {name: tensor.detach().clone() for name, tensor in live.items()}
        self._config = parent_dir / "adapter_config.json" if parent_dir is not None else None

    def logits(self, model: Any, rows: Rows, pad_id: int, device: str) -> torch.Tensor:
        with torch.no_grad(), self._swapped(model):
            return completion_logits(model, rows, pad_id, device)[0]

    @contextlib.contextmanager
    def _swapped(self, model: Any) -> Iterator[None]:
        from peft import get_peft_model_state_dict

        live = get_peft_model_state_dict(model)  # views of the adapter's parameters
        kept = {name: tensor.detach().clone() for name, tensor in live.items()}
        try:
            for name, tensor in live.items():
                tensor.copy_(self.weights[name])
            yield
        finally:
            for name, tensor in live.items():
                tensor.copy_(kept[name])

    def update(self, model: Any) -> None:
        from peft import get_peft_model_state_dict

        with torch.no_grad():
            for name, tensor in get_peft_model_state_dict(model).items():
                self.weights[name].mul_(1.0 - self.rate).add_(tensor.detach(), alpha=self.rate)

    def save(self, output_dir: Path) -> None:
        from safetensors.torch import save_file

        directory = output_dir / EMA_DIR
        directory.mkdir(parents=True, exist_ok=True)
        save_file(
            {name: tensor.contiguous() for name, tensor in self.weights.items()},
            str(directory / "adapter_model.safetensors"),
        )
        config = output_dir / "adapter_config.json"
        (directory / "adapter_config.json").write_text(config.read_text() if config.exists() else json.dumps({}))


class ModelTeacher(Teacher):
    """A frozen model of its own: `directory` is a full model, or an adapter merged into the base."""

    kind = "model"

    def __init__(self, base_model_path: Path, directory: Path, device: str, dtype: torch.dtype) -> None:
        from transformers import AutoModelForCausalLM

        if (directory / "adapter_config.json").exists():
            from peft import PeftModel

            base = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=dtype)
            model: Any = PeftModel.from_pretrained(base, str(directory)).merge_and_unload()
        else:
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype)
        self.model = model.to(device).eval().requires_grad_(False)

    def logits(self, model: Any, rows: Rows, pad_id: int, device: str) -> torch.Tensor:
        with torch.no_grad():
            return completion_logits(self.model, rows, pad_id, device)[0]


def job_teacher(job: TrainingJob) -> JobTeacher:
    """The teacher the recipe resolved for `job`; else the recipe configuration's `teacher`, which must then be
    `self` or `ema` (a release, scenario or path teacher is resolved to a directory before the job starts)."""
    if job.teacher is not None:
        return job.teacher
    config: Any = job.recipe_config
    named = config.teacher
    if named not in ("self", "ema"):
        raise ValueError(f"teacher {named!r} was not resolved to a directory (the job's `teacher`)")
    return JobTeacher(named)


def open_teacher(job: TrainingJob, model: Any, device: str) -> Teacher:
    """The teacher of `job` (`job_teacher`; a `model` directory without weights, such as a base release, is the
    `self` teacher); the `ema` teacher moves at the recipe configuration's `ema_rate`."""
    from reef.training.teacher_spec import holds_weights

    spec = job_teacher(job)
    if spec.kind == "ema":
        config: Any = job.recipe_config
        return EmaTeacher(model, job.parent_adapter_path, config.ema_rate)
    if spec.kind == "self" or spec.path is None or not holds_weights(spec.path):
        if spec.kind != "self" and spec.path is None:
            raise ValueError(f"teacher {spec.kind!r} was not resolved to a directory (the job's `teacher.path`)")
        return SelfTeacher()
    dtype = next(model.parameters()).dtype
    return ModelTeacher(job.base_model_path, spec.path, device, dtype)
