"""From JSON samples to padded token tensors.

A sample names its prompt as `prompt_ids` (token ids, as recorded by the local engine) or `messages`
(+ optional `tools`, rendered with the model's chat template), and its completion as `completion_ids` or
`completion_text` (tokenized, end-of-sequence appended). Policy samples add `old_logprobs` (one per
completion token, recorded at serving time) and `advantage`.
"""

from __future__ import annotations

from typing import Any

import torch


def tokenize_sample(sample: dict[str, Any], tokenizer: Any, max_seq_len: int) -> dict[str, Any]:
    """`sample` with `prompt_ids` and `completion_ids` filled in and cut to `max_seq_len` tokens in all."""
    prompt_ids = sample.get("prompt_ids")
    if prompt_ids is None:
        prompt_ids = render_prompt(tokenizer, sample["messages"], sample.get("tools"))
    completion_ids = sample.get("completion_ids")
    if completion_ids is None:
        from reef.inference.local.prompt import reply_ids

        completion_ids = reply_ids(tokenizer, sample["completion_text"])
    old_logprobs = sample.get("old_logprobs")
    # Keep the completion (it carries the loss) and drop the oldest prompt tokens; one prompt token must remain.
    completion_ids = list(completion_ids)[: max_seq_len - 1]
    prompt_ids = list(prompt_ids)[-(max_seq_len - len(completion_ids)) :]
    tokenized = {**sample, "prompt_ids": prompt_ids, "completion_ids": completion_ids}
    if old_logprobs is not None:
        tokenized["old_logprobs"] = list(old_logprobs)[: len(completion_ids)]
    return tokenized


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: Any = None) -> list[int]:
    """Prompt token ids exactly as the local engine renders them, so training sees the serving prompt format."""
    from reef.inference.local.prompt import render_prompt_ids

    return render_prompt_ids(tokenizer, messages, tools)


def collate(samples: list[dict[str, Any]], pad_id: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`/`attention_mask` `[B, L]` and per-position `mask`/`old_logprobs` `[B, L-1]`.

    Position t of the `[B, L-1]` tensors scores token t+1, so the completion of a sample with a prompt of
    length p and a completion of length c occupies positions p-1 … p+c-2.
    """
    length = max(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in samples)
    input_ids = torch.full((len(samples), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), length), dtype=torch.long)
    mask = torch.zeros((len(samples), length - 1))
    old_logprobs = torch.zeros((len(samples), length - 1))
    for row, sample in enumerate(samples):
        prompt, completion = sample["prompt_ids"], sample["completion_ids"]
        tokens = prompt + completion
        input_ids[row, : len(tokens)] = torch.tensor(tokens)
        attention_mask[row, : len(tokens)] = 1
        start, end = len(prompt) - 1, len(tokens) - 1
        mask[row, start:end] = 1
        if sample.get("old_logprobs") is not None:
            old_logprobs[row, start:end] = torch.tensor(sample["old_logprobs"], dtype=torch.float32)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "mask": mask, "old_logprobs": old_logprobs}
    batch["advantages"] = torch.tensor([float(s.get("advantage", 0.0)) for s in samples])
    return {name: tensor.to(device) for name, tensor in batch.items()}


def token_logprobs(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """log p(x_{t+1} | x_{≤t}) under `model` for every position, `[B, L-1]`."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["input_ids"][:, 1:].unsqueeze(-1)
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets).squeeze(-1)
