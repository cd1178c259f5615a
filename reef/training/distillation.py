"""One distillation step's loss (`sdft`, `sdpo`, `opd`): the teacher pass, the student pass, a divergence.

Per micro-batch, with S the student and T the teacher over the student's recorded completion tokens y:

    L = Σ_{b,t} w_b · ι_{b,t} · m_{b,t} · D_t(S, T) / Σ_{b,t} m_{b,t}

- D_t: the recipe configuration's `divergence`: `forward_kl` (KL(T‖S)), `reverse_kl` (KL(S‖T)), `jsd` (JSD_β,
  `jsd_beta`), each over the full vocabulary or, with `top_k` > 0, the student's top-k tokens plus a tail bucket; or
  `sampled_reverse_kl` (the score-function surrogate on y_t alone, for on-policy distillation).
- ι_{b,t}: the importance weight against the recorded rollout log-probs, capped at `importance_cap` (0: off).
- m_{b,t}: 1 on completion tokens (and where the sample's `completion_mask` is 1: a multi-turn sample's own turns),
  0 on the first `skip_first_tokens` of each; w_b: the sample's `weight` (default 1).

Samples carry the student's `prompt_ids` / `completion_ids` / `old_logprobs` and the teacher's prompt as
`teacher_messages` (+ `tools`), `teacher_prompt_ids`, or neither (the teacher sees the student's prompt).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from reef.training import divergences
from reef.training.jobfile import TrainingJob
from reef.training.samples import render_prompt
from reef.training.teacher import Teacher, completion_logits, job_teacher, open_teacher

FULL_DISTRIBUTION: dict[str, Callable[..., torch.Tensor]] = {
    "forward_kl": divergences.forward_kl,
    "reverse_kl": divergences.reverse_kl,
    "jsd": divergences.generalized_jsd,
}
DIVERGENCES = frozenset({*FULL_DISTRIBUTION, "sampled_reverse_kl"})


def with_teacher_prompt(sample: dict[str, Any], tokenizer: Any, max_seq_len: int) -> dict[str, Any]:
    """`sample` with `teacher_prompt_ids`: its teacher messages rendered like a serving prompt, else its own prompt;
    cut from the left so that prompt and completion fit `max_seq_len`."""
    teacher_ids = sample.get("teacher_prompt_ids")
    if teacher_ids is None and sample.get("teacher_messages"):
        teacher_ids = render_prompt(tokenizer, sample["teacher_messages"], sample.get("tools"))
    if teacher_ids is None:
        teacher_ids = sample["prompt_ids"]
    room = max(1, max_seq_len - len(sample["completion_ids"]))
    return {**sample, "teacher_prompt_ids": list(teacher_ids)[-room:]}


class DistillationTerms(Protocol):
    """What the teacher pass reads from a distillation recipe's configuration."""

    @property
    def divergence(self) -> str: ...

    @property
    def top_k(self) -> int: ...

    @property
    def jsd_beta(self) -> float: ...

    @property
    def importance_cap(self) -> float: ...

    @property
    def skip_first_tokens(self) -> int: ...


class DistillationStep:
    """Computes a micro-batch's distillation loss; keeps the teacher (and its EMA) across the job's steps."""

    def __init__(self, config: Any, model: Any, pad_id: int, device: str, teacher: Teacher) -> None:
        terms: DistillationTerms = config
        self.model, self.pad_id, self.device, self.teacher = model, pad_id, device, teacher
        self.divergence = terms.divergence
        if self.divergence not in DIVERGENCES:
            raise ValueError(f"unknown divergence {self.divergence!r}: use one of {sorted(DIVERGENCES)}")
        self.top_k = terms.top_k
        self.beta = terms.jsd_beta
        self.cap = terms.importance_cap
        self.skip = terms.skip_first_tokens
        self.teacher_s = 0.0

    @classmethod
    def open(cls, job: TrainingJob, model: Any, tokenizer: Any, device: str) -> DistillationStep:
        """The step of `job`, with its teacher opened (`teacher.open_teacher`)."""
        spec = job_teacher(job)
        if job.training.full_finetune and spec.kind in ("self", "ema"):
            raise ValueError("the self and ema teachers need a LoRA adapter (full_finetune is off for them)")
        teacher = open_teacher(job, model, device)
        return cls(job.recipe_config, model, tokenizer.pad_token_id, device, teacher)

    def loss(self, samples: list[dict[str, Any]]) -> tuple[torch.Tensor, dict[str, float]]:
        """(loss with gradient, `{"teacher_kl", "teacher_s"}`) for one micro-batch."""
        started = time.perf_counter()
        teacher_rows = [(s["teacher_prompt_ids"], s["completion_ids"]) for s in samples]
        teacher = torch.log_softmax(self.teacher.logits(self.model, teacher_rows, self.pad_id, self.device), -1)
        teacher_s = time.perf_counter() - started
        self.teacher_s += teacher_s
        student, tokens, rollout, mask = self._student(samples)
        student_token = student.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        teacher_token = teacher.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        weights = torch.tensor([float(s.get("weight", 1.0)) for s in samples], device=self.device).unsqueeze(-1)
        if self.cap > 0:
            recorded = torch.where(torch.isnan(rollout), student_token.detach(), rollout)
            weights = weights * divergences.importance_weights(student_token, recorded, self.cap)
        mask = divergences.skip_first(mask, self.skip)
        if self.divergence == "sampled_reverse_kl":
            per_token = divergences.sampled_reverse_kl_surrogate(student_token, teacher_token)
        else:
            if self.top_k > 0:
                student, teacher = divergences.top_k_with_tail(student, teacher, self.top_k)
            extra = {"beta": self.beta} if self.divergence == "jsd" else {}
            per_token = FULL_DISTRIBUTION[self.divergence](student, teacher, **extra)
        loss = divergences.masked_mean(per_token, weights, mask)
        kl = divergences.masked_mean(divergences.sampled_reverse_kl(student_token, teacher_token), 1.0, mask)
        return loss, {"teacher_kl": float(kl.detach()), "teacher_s": round(teacher_s, 4)}

    def _student(self, samples: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The student's log-probs over its completions `[B, C, V]`, the completion ids and recorded log-probs
        (`_completion_tensors`) and the mask of the positions it is trained on `[B, C]`."""
        logits, mask = completion_logits(
            self.model, [(s["prompt_ids"], s["completion_ids"]) for s in samples], self.pad_id, self.device
        )
        tokens, rollout, own = self._completion_tensors(samples, mask.shape[1])
        return torch.log_softmax(logits, -1), tokens, rollout, mask * own

    def _completion_tensors(
        self, samples: list[dict[str, Any]], width: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Completion ids `[B, C]` (padding 0), recorded log-probs `[B, C]` (NaN where none were recorded) and the
        sample's own `completion_mask` `[B, C]` (1 where absent: every completion token is the model's)."""
        tokens = torch.zeros((len(samples), width), dtype=torch.long)
        rollout = torch.full((len(samples), width), float("nan"))
        own = torch.ones((len(samples), width))
        for row, sample in enumerate(samples):
            completion = sample["completion_ids"]
            tokens[row, : len(completion)] = torch.tensor(completion)
            recorded = sample.get("old_logprobs")
            if recorded:
                rollout[row, : len(recorded)] = torch.tensor(recorded[: len(completion)], dtype=torch.float32)
            if sample.get("completion_mask") is not None:
                given = sample["completion_mask"][: len(completion)]
                own[row, : len(given)] = torch.tensor(given, dtype=torch.float32)
        return tokens.to(self.device), rollout.to(self.device), own.to(self.device)

    def after_update(self) -> None:
        """After the optimizer step: the EMA teacher folds in the new weights."""
        self.teacher.update(self.model)

    def save(self, output_dir: Path) -> None:
        self.teacher.save(output_dir)
