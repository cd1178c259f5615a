"""Which teacher a distillation recipe asks for (`recipe_config.teacher`), parsed once, without loading anything.

    self              the served base model with the adapter disabled (peft's `disable_adapter`)
    ema               an exponential moving average of the policy adapter, kept in each release under `ema/`
    release:<id>      another release of the same scenario (a LoRA on the same base, or full weights)
    scenario:<name>   the serving release of another scenario (same release store, same base)
    <path>            a model directory (or adapter directory) whose tokenizer is the student's

The training job sees only `self`, `ema`, or a resolved model directory (`jobfile.JobTeacher`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from reef.core.errors import BadRequest

TeacherKind = Literal["self", "ema", "release", "scenario", "path"]
FIELD = "recipe_config.teacher"
EMA_DIR = "ema"  # the EMA adapter's directory inside a release


@dataclasses.dataclass(frozen=True, slots=True)
class TeacherSpec:
    """A parsed teacher: its kind and, for `release` / `scenario` / `path`, what it names."""

    kind: TeacherKind
    name: str = ""

    @property
    def needs_directory(self) -> bool:
        """Whether the job needs a teacher directory (a release, a scenario's head, a path) besides the student."""
        return self.kind in ("release", "scenario", "path")


def parse_teacher(value: object) -> TeacherSpec:
    """A `TeacherSpec` from the config value; BadRequest naming `recipe_config.teacher` when it is not one."""
    if not isinstance(value, str) or not value.strip():
        raise BadRequest("the teacher is 'self', 'ema', 'release:<id>', 'scenario:<name>' or a path", field=FIELD)
    text = value.strip()
    if text in ("self", "ema"):
        return TeacherSpec(text)  # type: ignore[arg-type]
    prefix, _, rest = text.partition(":")
    if prefix in ("release", "scenario"):
        if not rest:
            raise BadRequest(
                f"{prefix}: needs a {'release id' if prefix == 'release' else 'scenario name'}", field=FIELD
            )
        return TeacherSpec(prefix, rest)  # type: ignore[arg-type]
    path = Path(text).expanduser()
    if not path.is_dir():
        raise BadRequest(f"no teacher model directory at {text!r}", field=FIELD)
    return TeacherSpec("path", str(path))


def holds_weights(directory: Path) -> bool:
    """Whether `directory` holds an adapter or a full model (a base release holds neither: its teacher is `self`)."""
    names = ("adapter_config.json", "adapter_model.safetensors", "config.json")
    return any((directory / name).exists() for name in names)


def same_tokenizer(student_dir: Path, teacher_dir: Path) -> bool:
    """Whether two model directories tokenize identically (same vocabulary, same special tokens); an adapter
    directory without tokenizer files shares its base's tokenizer."""
    from transformers import AutoTokenizer

    if not any((teacher_dir / name).exists() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        return (teacher_dir / "adapter_config.json").exists()
    student, teacher = AutoTokenizer.from_pretrained(student_dir), AutoTokenizer.from_pretrained(teacher_dir)
    return bool(
        student.get_vocab() == teacher.get_vocab()
        and student.eos_token_id == teacher.eos_token_id
        and student.all_special_ids == teacher.all_special_ids
    )
