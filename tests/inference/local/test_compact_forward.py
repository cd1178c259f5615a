"""The compact Llama forward against transformers on the real SmolLM2: rows joining and leaving, long rows,
LoRA adapters (and one it cannot serve), and the bfloat16 engine's recorded log-probs."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext
from reef.inference.local import load_base_model, render_prompt_ids
from reef.inference.local.engine import LocalEngine
from reef.inference.local.llama import LlamaForward, lora_of, supports

pytestmark = pytest.mark.model

QUESTIONS = ["Describe the sea.", "What is 17 times 3?", "Write a haiku about rain.", "List three colors."]


@pytest.fixture(scope="module")
def base(model_dir: Path) -> tuple[Any, Any]:
    return load_base_model(model_dir, "cpu", "float32")


def reference_logits(model: Any, ids: list[int]) -> torch.Tensor:
    """The transformers model's next-token logits after `ids` (one plain forward, no cache)."""
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def prompts_of(tokenizer: Any) -> list[list[int]]:
    return [render_prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]


def test_rows_that_join_leave_and_outgrow_the_cache_decode_as_transformers_does(base):
    model, tokenizer = base
    assert supports(model)
    forward = LlamaForward(model, torch.float32)
    cache = forward.new_cache()
    prompts = prompts_of(tokenizer)
    rows = [list(p) for p in prompts[:3]]  # three prompts of different lengths, prefilled together
    with torch.inference_mode():
        logits = forward.prefill(cache, rows, tokenizer.pad_token_id, None)
        for step in range(150):  # past the cache's first 128 positions, so it grows while rows are live
            for row, row_logits in zip(rows, logits, strict=True):
                row.append(int(row_logits.argmax()))
            if step == 5:  # the middle row leaves; a new one joins
                cache.keep([0, 2])
                rows = [rows[0], rows[2]]
                joined = list(prompts[3])
                new = forward.prefill(cache, [joined], tokenizer.pad_token_id, None)
                joined.append(int(new[0].argmax()))
                rows.append(joined)
            logits = forward.decode(cache, torch.tensor([row[-1] for row in rows]), None)
            if step in (0, 6, 149):
                for row, row_logits in zip(rows, logits, strict=True):
                    expected = reference_logits(model, row)
                    assert (row_logits - expected).abs().max() < 2e-3
                    assert int(row_logits.argmax()) == int(expected.argmax())
    assert int(cache.lengths.max()) > 128


def test_scoring_gives_the_spare_cache_back_for_the_next_batch(base):
    model, tokenizer = base
    forward = LlamaForward(model, torch.float32)
    spare = forward.new_cache()
    forward.release(spare)
    prompt = prompts_of(tokenizer)[0]
    with torch.inference_mode():
        scores = forward.score(prompt, [tokenizer.eos_token_id], None)
    assert scores.shape == (1,) and float(scores[0]) <= 0
    assert forward.new_cache() is spare and spare.rows == 0


def test_a_lora_adapter_read_from_peft_gives_the_peft_models_logits_and_dora_is_declined(base, model_dir, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    _, tokenizer = base
    torch.manual_seed(0)
    fresh, _ = load_base_model(model_dir, "cpu", "float32")
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    config = LoraConfig(r=8, lora_alpha=16, target_modules=targets, init_lora_weights=False)
    get_peft_model(fresh, config).save_pretrained(tmp_path / "lora")
    dora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj"], init_lora_weights=False, use_dora=True)
    fresh, _ = load_base_model(model_dir, "cpu", "float32")
    get_peft_model(fresh, dora).save_pretrained(tmp_path / "dora")

    model, _ = load_base_model(model_dir, "cpu", "float32")
    forward = LlamaForward(model, torch.float32)  # built before peft wraps the projections, as the engine does
    peft_model = PeftModel.from_pretrained(model, str(tmp_path / "lora"), adapter_name="lora")
    peft_model.load_adapter(str(tmp_path / "dora"), adapter_name="dora")
    lora = lora_of(peft_model, "lora", model.config.num_hidden_layers)
    assert lora is not None and set(lora.layers[0]) == set(targets)
    assert lora_of(peft_model, "dora", model.config.num_hidden_layers) is None
    prompt = prompts_of(tokenizer)[0]
    peft_model.set_adapter("lora")
    with torch.inference_mode():
        expected = peft_model(input_ids=torch.tensor([prompt])).logits[0, -1]
        with peft_model.disable_adapter():
            plain = peft_model(input_ids=torch.tensor([prompt])).logits[0, -1]
        cache = forward.new_cache()
        adapted = forward.prefill(cache, [prompt], tokenizer.pad_token_id, lora)[0]
        without = forward.prefill(forward.new_cache(), [prompt], tokenizer.pad_token_id, None)[0]
    assert (expected - plain).abs().max() > 0.5  # the adapter matters…
    assert (adapted - expected).abs().max() < 2e-3  # …and the compact forward applies it as peft does
    assert (without - plain).abs().max() < 2e-3


@pytest.fixture(scope="module")
def bf16_engine(local_settings: InferenceSettings) -> Iterator[LocalEngine]:
    engine = LocalEngine(local_settings.model_copy(update={"dtype": "bfloat16"}))
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.aclose())


async def test_the_bfloat16_engine_records_its_precision_and_log_probs_close_to_a_float32_recomputation(
    bf16_engine, base
):
    model, tokenizer = base
    assert bf16_engine.compact is not None and bf16_engine.compact.precision == "bfloat16"
    bodies = [
        {"messages": [{"role": "user", "content": q}], "temperature": 1.0, "seed": i, "max_tokens": 40}
        for i, q in enumerate(QUESTIONS)
    ]
    completions = await asyncio.gather(
        *(bf16_engine.complete(Dialect.CHAT, body, RequestContext("bf16")) for body in bodies)
    )
    gaps: list[float] = []
    for completion in completions:
        training = completion.training
        assert training is not None and training["precision"] == "bfloat16"
        ids, logprobs = training["completion_token_ids"], training["logprobs"]
        text = completion.body["choices"][0]["message"]["content"]
        assert tokenizer.decode(ids, skip_special_tokens=True).strip() == text.strip()
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
        with torch.inference_mode():
            full = torch.tensor([training["prompt_token_ids"] + ids])
            exact = torch.log_softmax(model(input_ids=full).logits[0].float(), dim=-1)
        start = len(training["prompt_token_ids"]) - 1
        for position, (token, recorded) in enumerate(zip(ids, logprobs, strict=True)):
            gaps.append(abs(float(exact[start + position, token]) - recorded))
    # bfloat16 weights and matmul inputs move a log-prob by a few hundredths on average (measured ~0.03);
    # a wrong position, cache row or adapter moves it by whole nats.
    assert sum(gaps) / len(gaps) < 0.06
    assert max(gaps) < 0.6


def test_auto_precision_takes_bfloat16_only_where_the_cpu_runs_it_natively(base, monkeypatch):
    from reef.inference.local import engine as engine_module

    model, _ = base
    monkeypatch.setattr(engine_module, "bfloat16_supported", lambda: False)
    emulated = engine_module.compact_forward(model, "cpu", "auto")
    assert emulated is not None and emulated.precision == "float32"
    monkeypatch.setattr(engine_module, "bfloat16_supported", lambda: True)
    native = engine_module.compact_forward(model, "cpu", "auto")
    assert native is not None and native.precision == "bfloat16"
    assert engine_module.compact_forward(model, "cuda", "auto") is None
    assert engine_module.compact_forward(model, "cpu", "float16") is None
