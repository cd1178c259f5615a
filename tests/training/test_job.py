"""The training job on the real SmolLM2 (tiny: one or two samples, a few steps, short sequences)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch

from reef.core.settings import TrainingSettings
from reef.learning.base import TrainingJob
from reef.recipes.rl import RLConfig
from reef.recipes.sft import SFTConfig
from reef.training.job import run_training_job

pytestmark = pytest.mark.model

PROMPT = [{"role": "user", "content": "Reply with the secret word."}]


@pytest.fixture(scope="module")
def base_model_path() -> Path:
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path("smollm2", Path(os.environ.get("REEF_MODEL_CACHE", "~/.cache/reef/models")))


def training(**overrides) -> TrainingSettings:
    return TrainingSettings(
        lora_rank=8, learning_rate=1e-3, max_seq_len=48, target_modules=["q_proj", "v_proj"], **overrides
    )


def test_sft_loss_falls_over_a_few_steps_on_one_demonstration_and_training_continues_from_the_adapter(
    base_model_path, tmp_path
):
    sample = {"messages": PROMPT, "completion_text": "pineapple"}
    first = TrainingJob(base_model_path, None, [sample], "sft", training(epochs=3), SFTConfig(), tmp_path / "first")
    events: list[dict] = []
    result = run_training_job(first, progress=events.append)
    losses = result.metrics["loss"]
    assert [e["step"] for e in events] == [1, 2, 3] and len(losses) == 3
    assert losses[-1] < losses[0]
    assert (tmp_path / "first" / "adapter_model.safetensors").exists()

    # A job started from the parent adapter begins where the parent ended, not from the base model.
    second = TrainingJob(
        base_model_path, tmp_path / "first", [sample], "sft", training(epochs=1), SFTConfig(), tmp_path / "second"
    )
    continued = run_training_job(second).metrics["loss"][0]
    assert continued < losses[0]


def test_a_replayed_sample_trains_once_per_job_while_every_new_sample_trains_each_epoch(base_model_path, tmp_path):
    new = {"messages": PROMPT, "completion_text": "pineapple"}
    replayed = [{"messages": [{"role": "user", "content": f"Word {n}?"}], "completion_text": "mango"} for n in range(3)]
    job = TrainingJob(
        base_model_path, None, [new], "sft", training(epochs=2, micro_batch_size=1), SFTConfig(), tmp_path / "out"
    )
    result = run_training_job(dataclasses.replace(job, replayed=replayed)).metrics
    # two epochs of the new sample, three replayed samples shared between them: one micro-step each
    assert (result["steps"], result["samples"], result["replayed"]) == (2 + 3, 1, 3)


@pytest.mark.parametrize(("compute_dtype", "tolerance"), [("float32", 1e-4), ("bfloat16", 0.05)])
def test_the_first_rl_step_on_an_on_policy_rollout_has_ratio_one_so_the_loss_is_minus_the_advantage(
    base_model_path, tmp_path, compute_dtype, tolerance
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reef.training.samples import collate, render_prompt, token_logprobs

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    model = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32)
    prompt_ids = render_prompt(tokenizer, PROMPT)
    completion_ids = tokenizer("pineapple", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    sample = {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "advantage": 0.75}
    with torch.no_grad():
        recorded = token_logprobs(model, collate([sample], tokenizer.pad_token_id))[0]
    sample["old_logprobs"] = recorded[len(prompt_ids) - 1 :].tolist()
    sample["rollout_precision"] = "float32"

    # A fresh LoRA adapter starts as the identity, so the ratio is 1 and the KL to the base is 0: exactly so in
    # fp32, the precision the log-probs were recorded at; to within bfloat16's per-token spread (a few percent).
    settings = training(compute_dtype=compute_dtype)
    job = TrainingJob(base_model_path, None, [sample], "rl", settings, RLConfig(kl_coef=0.1), tmp_path / "rl")
    result = run_training_job(job)
    assert result.metrics["compute_dtype"] == compute_dtype
    assert result.metrics["loss"][0] == pytest.approx(-0.75, abs=tolerance)
    # The mismatch the importance ratio sees before any update, reported with what recorded the log-probs.
    first = result.metrics["rollout_first_step"]
    assert first["rollout_precisions"] == ["float32"]
    assert first["rollout_gap"] < tolerance and first["rollout_ratio_std"] < 2 * tolerance
