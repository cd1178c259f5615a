"""What the `opd` demo adds: the teacher it trains first, and the student's reverse KL to it on held-out prompts.

The teacher is never downloaded: the demo trains one with `sft` from the same base (scenario `demo-sft`, in the
same state directory), then serves `opd` with `teacher: scenario:demo-sft`, so the student starts from the base.
The reverse KL is measured outside the server, after it stopped: for each held-out prompt the student's greedy
answer y, then KL(S‖T) over the full vocabulary at each of its positions, averaged over all tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reef.demo.tasks import DemoTask

TEACHER_SCENARIO = "demo-sft"


def gap_closed(baseline: float | None, final: float | None, teacher: float | None) -> float | None:
    """The share of the base-to-teacher gap the student closed, (final − base) / (teacher − base); None if no gap."""
    if baseline is None or final is None or teacher is None or teacher <= baseline:
        return None
    return round((final - baseline) / (teacher - baseline), 4)


def head_directory(state_dir: Path, scenario: str) -> Path | None:
    """The serving release of `scenario` in the demo's state directory, materialized; None if it holds no weights."""
    from reef.core.settings import StorageSettings
    from reef.releases.git import open_release_store

    storage = StorageSettings(dir=state_dir)
    releases = open_release_store(storage.release_repository_location(), state_dir / "release-cache")
    head = releases.head(scenario)
    if head is None:
        return None
    path = releases.materialize(head)
    return path if (path / "adapter_config.json").exists() else None


def reverse_kl_to_teacher(
    base_path: Path, student_dir: Path | None, teacher_dir: Path, tasks: list[DemoTask], max_new_tokens: int
) -> float:
    """Mean per-token KL(S‖T) over the student's greedy answers to `tasks` (S: base + `student_dir`, or the base)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reef.training.divergences import masked_mean, reverse_kl
    from reef.training.samples import render_prompt
    from reef.training.teacher import completion_logits

    tokenizer = AutoTokenizer.from_pretrained(base_path)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def load(adapter: Path | None) -> Any:
        model: Any = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
        if adapter is not None:
            model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        return model.eval()

    student, teacher = load(student_dir), load(teacher_dir)
    rows = []
    with torch.no_grad():
        for task in tasks:
            prompt = render_prompt(tokenizer, task.messages())
            output = student.generate(
                torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad_id
            )
            rows.append((prompt, output[0][len(prompt) :].tolist() or [tokenizer.eos_token_id]))
        student_logits, mask = completion_logits(student, rows, pad_id, "cpu")
        teacher_logits, _ = completion_logits(teacher, rows, pad_id, "cpu")
        kl = reverse_kl(torch.log_softmax(student_logits, -1), torch.log_softmax(teacher_logits, -1))
        return round(float(masked_mean(kl, 1.0, mask)), 4)


def teacher_kl_figures(
    state_dir: Path, test: list[DemoTask], max_new_tokens: int, console: Any
) -> dict[str, float] | None:
    """The student's per-token reverse KL to the teacher on the held-out prompts, at the base and at the end."""
    from reef.core.settings import Settings
    from reef.learning.growth import base_model_path

    teacher_dir = head_directory(state_dir, TEACHER_SCENARIO)
    if teacher_dir is None:
        return None
    console.print("  measuring the per-token reverse KL to the teacher on the held-out prompts …")
    base = base_model_path(Settings())
    before = reverse_kl_to_teacher(base, None, teacher_dir, test, max_new_tokens)
    after = reverse_kl_to_teacher(base, head_directory(state_dir, "demo-opd"), teacher_dir, test, max_new_tokens)
    console.print(f"  reverse KL to the teacher: {before:.3f} (base) → {after:.3f} (final)")
    return {"before": before, "after": after}
