"""The fast training path (bfloat16 matmuls, chunked output projection) against the fp32 full-logits path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reef.core.settings import TrainingSettings
from reef.learning.base import TrainingJob
from reef.recipes.sft import SFTConfig
from reef.training.chunked_logprobs import chunked_token_logprobs, completion_logprobs
from reef.training.precision import resolve_compute_dtype

DEMONSTRATIONS = [
    ("Name a colour.", "Blue, like the sky on a clear day."),
    ("What is two plus two?", "Two plus two is four."),
    ("Say hello in French.", "Bonjour!"),
    ("Name a planet.", "Mars, the red planet."),
]


def full_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(hidden @ weight.T, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def test_chunked_log_probs_and_their_gradients_equal_the_full_log_softmax():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=generator, requires_grad=True)
    weight = torch.randn(50, 16, generator=generator, requires_grad=True)
    targets = torch.randint(0, 50, (37,), generator=generator)
    upstream = torch.randn(37, generator=generator)

    expected = full_logprobs(hidden, weight, targets)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (hidden, weight))
    chunked = chunked_token_logprobs(hidden, weight, targets, torch.float32, chunk_rows=8)  # 5 chunks, one short
    grads = torch.autograd.grad((chunked * upstream).sum(), (hidden, weight))

    torch.testing.assert_close(chunked, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # bfloat16 matmuls: the same values to within bfloat16's ~3 significant digits on logits of this size.
    rounded = chunked_token_logprobs(hidden, weight, targets, torch.bfloat16, chunk_rows=8)
    assert rounded.dtype == torch.float32 and (rounded - expected).abs().max() < 0.1
    rounded_grads = torch.autograd.grad((rounded * upstream).sum(), (hidden, weight))
    for got, want in zip(rounded_grads, expected_grads, strict=True):
        assert (got - want).abs().max() < 0.05 * want.abs().max()


def test_a_frozen_output_projection_is_cast_once_and_again_only_when_it_changes():
    generator = torch.Generator().manual_seed(1)
    hidden = torch.randn(5, 8, generator=generator)
    weight = torch.randn(12, 8, generator=generator)
    targets = torch.randint(0, 12, (5,), generator=generator)

    def logprobs() -> torch.Tensor:
        return chunked_token_logprobs(hidden, weight, targets, torch.bfloat16, chunk_rows=2)

    first = logprobs()
    assert torch.equal(logprobs(), first)  # served from the kept cast
    with torch.no_grad():
        weight.mul_(2.0)  # an in-place update (a full fine-tune's optimizer step) must be seen
    assert not torch.allclose(logprobs(), first)
    assert torch.allclose(logprobs(), full_logprobs(hidden, weight, targets), atol=0.2)


@pytest.mark.model
def test_frozen_weights_stored_in_bfloat16_give_the_autocast_step_the_same_values(base_model_path: Path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reef.training.precision import compute_context, keep_adapter_deltas_fp32, store_frozen_weights
    from reef.training.samples import collate

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    batch = collate(demonstrations(tokenizer), tokenizer.pad_token_id)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32), config)
    keep_adapter_deltas_fp32(model)
    with torch.no_grad(), compute_context(torch.bfloat16, "cpu"):
        expected = completion_logprobs(model, batch, torch.bfloat16)
        converted = store_frozen_weights(model, torch.bfloat16)
        got = completion_logprobs(model, batch, torch.bfloat16)
    layers = model.config.num_hidden_layers
    assert converted == 7 * layers  # every projection of every block; not the (tied) output projection
    assert model.get_output_embeddings().weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_auto_precision_is_bfloat16_for_a_lora_on_cuda_fp32_for_full_weights_and_an_explicit_setting_wins():
    assert resolve_compute_dtype("auto", "cuda") == torch.bfloat16
    assert resolve_compute_dtype("float32", "cuda") == torch.float32
    assert resolve_compute_dtype("bfloat16", "cpu") == torch.bfloat16
    assert resolve_compute_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)
    assert resolve_compute_dtype("auto", "cuda", full_finetune=True) == torch.float32


def demonstrations(tokenizer) -> list[dict]:
    from reef.training.samples import render_prompt

    return [
        {
            "prompt_ids": render_prompt(tokenizer, [{"role": "user", "content": question}]),
            "completion_ids": tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id],
        }
        for question, answer in DEMONSTRATIONS
    ]


@pytest.mark.model
def test_completion_log_probs_equal_the_full_logits_path_on_the_completion_positions(base_model_path: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reef.training.samples import collate, token_logprobs

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    model = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32)
    batch = collate(demonstrations(tokenizer), tokenizer.pad_token_id)
    with torch.no_grad():
        expected = token_logprobs(model, batch)
        got = completion_logprobs(model, batch, torch.float32)
    mask = batch["mask"].bool()
    torch.testing.assert_close(got[mask], expected[mask], atol=1e-4, rtol=1e-4)
    assert (got[~mask] == 0).all()


@pytest.mark.model
def test_a_few_bfloat16_steps_follow_the_fp32_full_logits_path(base_model_path: Path, tmp_path: Path):
    """The step before this path (fp32, full logits, written out here) and the job at bfloat16: same seed, same
    samples, same initial adapter; the losses and the adapter's movement must agree."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from reef.training.job import load_trainable_model, run_training_job
    from reef.training.losses import sft_loss
    from reef.training.samples import collate, token_logprobs

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    samples = demonstrations(tokenizer)
    settings = TrainingSettings(lora_rank=8, lora_alpha=16, max_seq_len=64, epochs=3, compute_dtype="bfloat16")
    job = TrainingJob(base_model_path, None, samples, "sft", settings, SFTConfig(), tmp_path / "bf16")

    torch.manual_seed(settings.seed)
    model, _, _ = load_trainable_model(job)
    initial = {name: tensor.detach().clone() for name, tensor in get_peft_model_state_dict(model).items()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate)
    batch = collate(samples, tokenizer.pad_token_id)
    reference_losses = []
    for _ in range(settings.epochs):
        loss = sft_loss(token_logprobs(model, batch), batch["mask"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        reference_losses.append(float(loss.detach()))
    reference = get_peft_model_state_dict(model)

    result = run_training_job(job)
    trained = load_file(str(tmp_path / "bf16" / "adapter_model.safetensors"))

    assert result.metrics["compute_dtype"] == "bfloat16"
    assert reference_losses[-1] < reference_losses[0] - 0.1  # the steps move the loss, so agreeing means something
    assert result.metrics["loss"] == pytest.approx(reference_losses, abs=0.02)
    reference_move = torch.cat([(reference[name] - initial[name]).flatten() for name in sorted(initial)])
    trained_move = torch.cat([(trained[name] - initial[name]).flatten() for name in sorted(initial)])
    assert torch.nn.functional.cosine_similarity(trained_move, reference_move, dim=0) > 0.9
    assert (trained_move.norm() / reference_move.norm() - 1).abs() < 0.1


@pytest.mark.model
def test_completion_logits_project_only_the_completion_positions_with_the_full_logits_values(base_model_path: Path):
    """The teacher and student passes of distillation (`completion_logits`) against each row's own full-logits
    forward: the same logits with the adapter on and off, and the same adapter gradient."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reef.training.teacher import completion_logits

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    config = LoraConfig(r=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch.float32), config)
    rows = [(s["prompt_ids"], s["completion_ids"]) for s in demonstrations(tokenizer)]

    def full_logits() -> list[torch.Tensor]:
        return [model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1 : len(p) - 1 + len(c)] for p, c in rows]

    def loss(logits: list[torch.Tensor]) -> torch.Tensor:
        return sum(torch.log_softmax(row, -1).max(-1).values.sum() for row in logits)

    got, mask = completion_logits(model, rows, tokenizer.pad_token_id, "cpu")
    expected = full_logits()
    for row, (_, completion) in enumerate(rows):
        assert mask[row].sum() == len(completion)
        torch.testing.assert_close(got[row, : len(completion)], expected[row], atol=1e-4, rtol=1e-4)
    lora_b = next(p for name, p in model.named_parameters() if "lora_B" in name)
    (grad_full,) = torch.autograd.grad(loss(expected), lora_b)
    (grad_got,) = torch.autograd.grad(loss([got[r, : len(c)] for r, (_, c) in enumerate(rows)]), lora_b)
    torch.testing.assert_close(grad_got, grad_full, atol=1e-4, rtol=1e-3)
    assert grad_full.abs().max() > 0
    with torch.no_grad(), model.disable_adapter():
        base, _ = completion_logits(model, rows, tokenizer.pad_token_id, "cpu")
        base_expected = full_logits()
    for row, (_, completion) in enumerate(rows):
        assert not torch.allclose(base[row, : len(completion)], got[row, : len(completion)], atol=1e-2)
        torch.testing.assert_close(base[row, : len(completion)], base_expected[row], atol=1e-4, rtol=1e-4)
