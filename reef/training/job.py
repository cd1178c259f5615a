"""The training job: base model (+ parent adapter) → LoRA steps on the batch → candidate adapter directory.

The one function both backends launch (`local`: in a subprocess, `ray`: as a Ray task).
`job.training` carries the deployment's `TrainingSettings`, `job.recipe_config` the recipe's own (`clip_low`,
`kl_coef`, …): both typed, so every default is the settings model's or the recipe configuration model's.
The distillation losses (`sdft`, `sdpo`, `opd`) add a teacher pass per micro-batch (`distillation`); `openclawrl`
adds it to a policy-gradient term (`hindsight`).
The forward passes run at `compute_dtype` (`precision`: bfloat16 matmuls where the hardware has them, fp32
master weights either way); the plain losses read the recorded tokens' log-probs through the chunked output
projection (`chunked_logprobs`), never the full `[B, T, V]` logits.
"""

from __future__ import annotations

import os
import random
import resource
import time
from collections.abc import Callable
from typing import Any

import torch

from reef.training.chunked_logprobs import completion_logprobs
from reef.training.distillation import DistillationStep, with_teacher_prompt
from reef.training.hindsight import HindsightStep
from reef.training.jobfile import TrainingJob, TrainingResult
from reef.training.loss_names import DISTILLATION_LOSSES
from reef.training.losses import kl_coefficient, resolve_loss
from reef.training.precision import (
    compute_context,
    keep_adapter_deltas_fp32,
    resolve_compute_dtype,
    store_frozen_weights,
)
from reef.training.samples import collate, tokenize_sample

Progress = Callable[[dict[str, Any]], None]
StepLoss = Callable[[list[dict[str, Any]]], tuple[torch.Tensor, dict[str, Any]]]


def run_training_job(job: TrainingJob, progress: Progress | None = None) -> TrainingResult:
    """Train on `job.samples` for `epochs` × micro-batches, one optimizer step each, and on `job.replayed` once
    (dealt out in order: each epoch takes the next contiguous share); save and return the adapter."""
    started = time.perf_counter()
    settings = job.training
    seed = settings.seed
    random.seed(seed)
    torch.manual_seed(seed)
    model, tokenizer, device = load_trainable_model(job)
    full_finetune = settings.full_finetune
    compute_dtype = resolve_compute_dtype(settings.compute_dtype, device, full_finetune)
    if compute_dtype != torch.float32 and not full_finetune:
        keep_adapter_deltas_fp32(model)
        store_frozen_weights(model, compute_dtype)
    max_seq_len = settings.max_seq_len
    samples = [tokenize_sample(s, tokenizer, max_seq_len) for s in job.samples]
    replayed = [tokenize_sample(s, tokenizer, max_seq_len) for s in job.replayed]
    distill = None
    if job.loss in DISTILLATION_LOSSES:
        samples = [with_teacher_prompt(s, tokenizer, max_seq_len) for s in samples]
        replayed = [with_teacher_prompt(s, tokenizer, max_seq_len) for s in replayed]
        step_class = HindsightStep if job.loss == "openclawrl" else DistillationStep
        distill = step_class.open(job, model, tokenizer, device)
    plain = plain_loss(job, model, tokenizer, device, compute_dtype)
    micro = settings.micro_batch_size
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate)
    order = random.Random(seed)
    losses: list[float] = []
    terms: dict[str, list[float]] = {}  # a loss's own terms per step (openclawrl: loss_rl, loss_opd)
    tokens = 0
    first_gap: dict[str, Any] = {}
    model.train()
    epochs = settings.epochs
    for epoch in range(epochs):
        # every new sample each epoch; the replayed ones dealt out in order, a contiguous share an epoch
        share = replayed[epoch * len(replayed) // epochs : (epoch + 1) * len(replayed) // epochs]
        passing = [*samples, *share]
        order.shuffle(passing)
        for first in range(0, len(passing), micro):
            chunk = passing[first : first + micro]
            with compute_context(compute_dtype, device):
                loss, extra = distill.loss(chunk) if distill is not None else plain(chunk)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if distill is not None:
                distill.after_update()
            if not losses:
                first_gap = {name: value for name, value in extra.items() if name.startswith("rollout_")}
            losses.append(float(loss.detach()))
            for name, value in extra.items():
                if name.startswith("loss_"):
                    terms.setdefault(name, []).append(float(value))
            tokens += sum(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in chunk)
            if progress is not None:
                progress(
                    {
                        "step": len(losses),
                        "epoch": epoch,
                        "loss": losses[-1],
                        "tokens": tokens,
                        "elapsed_s": round(time.perf_counter() - started, 3),
                        **extra,
                    }
                )
    job.output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(job.output_dir, safe_serialization=True)
    if distill is not None:
        distill.save(job.output_dir)
    if full_finetune:
        tokenizer.save_pretrained(job.output_dir)  # full weights make a standalone model directory
    metrics = {
        "loss": losses,
        "steps": len(losses),
        "samples": len(samples),
        "replayed": len(replayed),
        "tokens": tokens,
        "wall_s": round(time.perf_counter() - started, 3),
        "device": device,
        "compute_dtype": str(compute_dtype).removeprefix("torch."),
        "full_finetune": full_finetune,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "pid": os.getpid(),
        **terms,
    }
    if distill is not None:
        metrics.update(teacher=distill.teacher.kind, teacher_s=round(distill.teacher_s, 3))
    if first_gap:
        metrics["rollout_first_step"] = first_gap  # the precision mismatch, before any update (see rollout_gap)
    return TrainingResult(adapter_path=job.output_dir, metrics=metrics)


def plain_loss(job: TrainingJob, model: Any, tokenizer: Any, device: str, compute_dtype: torch.dtype) -> StepLoss:
    """The loss of the recipes that score the recorded tokens alone (`sft`, `rl`, `grpo`, a dotted function)."""
    loss_fn = resolve_loss(job.loss) if job.loss not in DISTILLATION_LOSSES else None
    kl_coef = kl_coefficient(job.recipe_config)

    def step(chunk: list[dict[str, Any]]) -> tuple[torch.Tensor, dict[str, Any]]:
        assert loss_fn is not None
        batch = collate(chunk, tokenizer.pad_token_id, device)
        logprobs = completion_logprobs(model, batch, compute_dtype)
        ref_logprobs = None
        if kl_coef:
            with torch.no_grad(), model.disable_adapter():
                ref_logprobs = completion_logprobs(model, batch, compute_dtype)
        return loss_fn(batch, logprobs, ref_logprobs, job.recipe_config), rollout_gap(chunk, batch, logprobs)

    return step


def rollout_gap(chunk: list[dict[str, Any]], batch: dict[str, torch.Tensor], logprobs: torch.Tensor) -> dict[str, Any]:
    """How far this step's log-probs are from those recorded at serving time, over the recorded tokens.

    `rollout_gap` = mean |log π_train(y_t) − log π_recorded(y_t)| and `rollout_ratio_std` = the spread of
    exp(log π_train − log π_recorded). When the job starts from the adapter that served the rollouts (not from
    a kept, unpublished lineage tip), the first step's figures are the serving/training precision mismatch the
    importance ratio sees (`rollout_precisions`: what the engine recorded; this job's `compute_dtype` is in the
    metrics).
    """
    rows = [i for i, sample in enumerate(chunk) if sample.get("old_logprobs") is not None]
    if not rows:
        return {}
    index = torch.tensor(rows, device=logprobs.device)
    mask = batch["mask"].index_select(0, index).bool()
    delta = (logprobs.detach().index_select(0, index) - batch["old_logprobs"].index_select(0, index))[mask]
    delta = delta[torch.isfinite(delta)]  # opd pads untrained turns' recorded log-probs with NaN
    if delta.numel() == 0:
        return {}
    precisions = sorted({str(chunk[i].get("rollout_precision") or "unknown") for i in rows})
    return {
        "rollout_gap": round(float(delta.abs().mean()), 5),
        "rollout_ratio_std": round(float(delta.exp().std()) if delta.numel() > 1 else 0.0, 5),
        "rollout_precisions": precisions,
    }


def load_trainable_model(job: TrainingJob) -> tuple[Any, Any, str]:
    """(model with trainable parameters, tokenizer, device): LoRA, the parent's LoRA continued, or all weights."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    settings = job.training
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(job.base_model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: Any = AutoModelForCausalLM.from_pretrained(job.base_model_path, dtype=dtype)
    model.to(device)
    if settings.full_finetune:
        if kl_coefficient(job.recipe_config):
            raise ValueError("kl_coef needs a LoRA adapter (the base model is the adapter-disabled model)")
        return model, tokenizer, device
    if job.parent_adapter_path is not None:
        model = PeftModel.from_pretrained(model, job.parent_adapter_path, is_trainable=True)
    else:
        lora = LoraConfig(
            r=settings.lora_rank,
            lora_alpha=settings.lora_alpha,
            lora_dropout=settings.lora_dropout,
            target_modules=list(settings.target_modules) or "all-linear",  # peft: every block linear, no head
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    return model, tokenizer, device
