"""The `openclawrl` step's loss: a clipped policy gradient on the judge's reward plus hindsight distillation,
over one student pass and the distillation teacher pass (`distillation.DistillationStep`, `teacher`).

Per micro-batch, with S the student, y_b the recorded completion of turn b, r_b its reward, h_b its hints:

    L_rl  = clipped_policy_loss(log S(y_t), log π_recorded(y_t), A_b = r_b)                (`losses`)
    L_opd = Σ_{b: h_b} Σ_t ι_{b,t} · m_{b,t} · D(T(· | x_b ⊕ h_b, y<t), S(· | x_b, y<t)) / Σ_{b: h_b} Σ_t m_{b,t}
    L     = w_rl · L_rl + w_opd · L_opd

T is the frozen teacher (`self`: the base with the adapter disabled) prompted with the hints; D the configured
divergence, over the student's top-k tokens plus a tail bucket when `top_k` > 0; ι the capped importance weight.
The teacher pass runs only on the turns that have hints (`weight` > 0). Both terms are returned for the step log.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch

from reef.training import divergences
from reef.training.distillation import FULL_DISTRIBUTION, DistillationStep
from reef.training.losses import ClipRange, clipped_policy_loss
from reef.training.teacher import Teacher


class HindsightTerms(ClipRange, Protocol):
    """What the `openclawrl` step reads from its recipe's configuration besides the teacher pass's terms."""

    @property
    def w_rl(self) -> float: ...

    @property
    def w_opd(self) -> float: ...


class HindsightStep(DistillationStep):
    """`DistillationStep` with the policy-gradient term added and the distillation restricted to hinted turns."""

    def __init__(self, config: Any, model: Any, pad_id: int, device: str, teacher: Teacher) -> None:
        super().__init__(config, model, pad_id, device, teacher)
        terms: HindsightTerms = config
        self.w_rl, self.w_opd = terms.w_rl, terms.w_opd
        self.clip_low, self.clip_high = terms.clip_low, terms.clip_high

    def loss(self, samples: list[dict[str, Any]]) -> tuple[torch.Tensor, dict[str, float]]:
        """(w_rl · L_rl + w_opd · L_opd, `{"loss_rl", "loss_opd", "hinted", "teacher_kl", "teacher_s"}`)."""
        student, tokens, rollout, mask = self._student(samples)
        student_token = student.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        recorded = torch.where(torch.isnan(rollout), student_token.detach(), rollout)
        advantages = torch.tensor([float(s.get("advantage", 0.0)) for s in samples], device=self.device)
        rl = clipped_policy_loss(student_token, recorded, advantages, mask, self.clip_low, self.clip_high)
        hinted = [row for row, s in enumerate(samples) if float(s.get("weight", 1.0)) > 0]
        opd, kl, teacher_s = torch.zeros((), device=self.device), 0.0, 0.0
        if hinted and self.w_opd > 0:
            chosen = [samples[row] for row in hinted]
            opd, kl, teacher_s = self._distillation(chosen, hinted, student, tokens, recorded, mask)
        loss = self.w_rl * rl + self.w_opd * opd
        return loss, {
            "loss_rl": round(float(rl.detach()), 6),
            "loss_opd": round(float(opd.detach()), 6),
            "hinted": len(hinted),
            "teacher_kl": kl,
            "teacher_s": round(teacher_s, 4),
        }

    def _distillation(
        self,
        samples: list[dict[str, Any]],
        rows: list[int],
        student: torch.Tensor,
        tokens: torch.Tensor,
        recorded: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, float, float]:
        """(L_opd, the sampled reverse KL to the teacher, teacher seconds) over the hinted rows."""
        started = time.perf_counter()
        teacher_rows = [(s["teacher_prompt_ids"], s["completion_ids"]) for s in samples]
        teacher = torch.log_softmax(self.teacher.logits(self.model, teacher_rows, self.pad_id, self.device), -1)
        teacher_s = time.perf_counter() - started
        self.teacher_s += teacher_s
        index = torch.tensor(rows, device=self.device)
        width = teacher.shape[1]
        student = student[index, :width]
        student_token = student.gather(-1, tokens[index, :width].unsqueeze(-1)).squeeze(-1)
        mask = divergences.skip_first(mask[index, :width], self.skip)
        weights = torch.tensor([float(s.get("weight", 1.0)) for s in samples], device=self.device).unsqueeze(-1)
        if self.cap > 0:
            weights = weights * divergences.importance_weights(student_token, recorded[index, :width], self.cap)
        teacher_token = teacher.gather(-1, tokens[index, :width].unsqueeze(-1)).squeeze(-1)
        if self.divergence == "sampled_reverse_kl":
            per_token = divergences.sampled_reverse_kl_surrogate(student_token, teacher_token)
        else:
            reduced_student, reduced_teacher = student, teacher
            if self.top_k > 0:
                reduced_student, reduced_teacher = divergences.top_k_with_tail(student, teacher, self.top_k)
            extra = {"beta": self.beta} if self.divergence == "jsd" else {}
            per_token = FULL_DISTRIBUTION[self.divergence](reduced_student, reduced_teacher, **extra)
        loss = divergences.masked_mean(per_token, weights, mask)
        kl = divergences.masked_mean(divergences.sampled_reverse_kl(student_token, teacher_token), 1.0, mask)
        return loss, round(float(kl.detach()), 6), teacher_s
