"""Fixtures for training-job tests on the real SmolLM2: its path and a recorded greedy rollout."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("REEF_MODEL_CACHE", "~/.cache/reef/models"))


@pytest.fixture(scope="module")
def base_model_path() -> Path:
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path("smollm2", CACHE)


@pytest.fixture(scope="module")
def greedy_rollout(base_model_path: Path) -> Callable[[list[dict], int], dict]:
    """Make a rollout as the engine records a turn: the base model's greedy answer to `messages` (at most
    `max_new_tokens`) with its per-token log-probs (`prompt_ids`, `completion_ids`, `old_logprobs`)."""

    def rollout(messages: list[dict], max_new_tokens: int) -> dict:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from reef.training.samples import collate, render_prompt, token_logprobs

        tokenizer = AutoTokenizer.from_pretrained(base_model_path)
        model = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32)
        prompt_ids = render_prompt(tokenizer, messages)
        with torch.no_grad():
            output = model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_new_tokens, do_sample=False)
            sample = {"prompt_ids": prompt_ids, "completion_ids": output[0][len(prompt_ids) :].tolist()}
            recorded = token_logprobs(model, collate([sample], tokenizer.pad_token_id))[0]
        return {**sample, "old_logprobs": recorded[len(prompt_ids) - 1 :].tolist()}

    return rollout
