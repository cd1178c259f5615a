"""Teacher-forced scoring on the local engine with the real SmolLM2: recorded log-probs, adapters, bad input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from reef.core.errors import BadRequest, NotFound
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext
from reef.inference.local import load_base_model, render_prompt_ids
from reef.inference.local.engine import LocalEngine
from reef.inference.upstream import UpstreamEngine

pytestmark = pytest.mark.model

QUESTION = "What is the capital of France? Answer in one word."
CTX = RequestContext(scenario="gate")


def random_adapter(model_dir: Path, out_dir: Path) -> Path:
    """A LoRA adapter with random (non-zero) A and B, so it visibly moves every log-prob; no training needed."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model, _ = load_base_model(model_dir, "cpu", "float32")
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def engine(local_settings: InferenceSettings) -> Iterator[LocalEngine]:
    """In float32, where scores, recorded log-probs and a transformers forward agree to float rounding (the
    bfloat16 engine's agreement is checked in test_compact_forward.py)."""
    engine = LocalEngine(local_settings.model_copy(update={"dtype": "float32"}))
    asyncio.run(engine.start())
    assert engine.compact is not None and engine.compact.precision == "float32"
    yield engine
    asyncio.run(engine.aclose())


def release(scenario: str, release_id: str) -> Release:
    return Release(release_id, scenario, None, "content", "training", 1, "sft", {}, 0.0)


def max_gap(left: list[float], right: list[float]) -> float:
    assert len(left) == len(right)
    return max(abs(a - b) for a, b in zip(left, right, strict=True))


@pytest.fixture(scope="module")
def adapter(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_adapter(model_dir, tmp_path_factory.mktemp("candidate"))


@pytest.fixture(scope="module")
def rollout(tokenizer) -> tuple[list[int], list[int]]:
    """A prompt and a completion the model did not necessarily write (teacher forcing scores any text)."""
    prompt = render_prompt_ids(tokenizer, [{"role": "user", "content": QUESTION}])
    completion = tokenizer("The capital of France is Paris.", add_special_tokens=False)["input_ids"]
    return prompt, completion + [tokenizer.eos_token_id]


def ask(**extra) -> dict:
    return {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": 16, **extra}


async def test_the_scores_of_a_greedy_completion_match_the_log_probs_recorded_while_decoding_it(engine):
    completion = await engine.complete(Dialect.CHAT, ask(), CTX)
    training = completion.training
    assert training is not None and len(training["completion_token_ids"]) > 2
    scores = await engine.score(training["prompt_token_ids"], training["completion_token_ids"], CTX)
    assert engine.scores_completions and len(scores) == len(training["logprobs"])
    assert max_gap(scores, training["logprobs"]) < 1e-3


async def test_the_scores_equal_a_plain_transformers_forward_over_prompt_and_completion(engine, rollout):
    prompt, completion = rollout
    scores = await engine.score(prompt, completion, CTX)
    # The engine's own model, called here while the engine is idle; no adapter has been loaded into it yet
    # (the adapter tests come later), so this is the plain base model.
    assert engine._adapters is not None and not engine._adapters.resident
    model = engine._adapters.model
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1]
    expected = logprobs.gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1).tolist()
    assert max_gap(scores, expected) < 1e-4
    assert all(score <= 0 for score in scores)


async def test_a_candidate_adapter_changes_the_scores_and_the_base_scores_come_back(engine, adapter, rollout):
    prompt, completion = rollout
    base = await engine.score(prompt, completion, CTX)
    candidate = await engine.score(prompt, completion, RequestContext("gate", candidate_path=adapter))
    assert max_gap(base, candidate) > 0.05
    assert max_gap(await engine.score(prompt, completion, CTX), base) < 1e-5
    assert engine.active_release_id("gate") is None


async def test_a_release_scores_as_its_candidate_did_and_a_pinned_release_after_it_is_withdrawn(
    engine, adapter, rollout
):
    prompt, completion = rollout
    base = await engine.score(prompt, completion, RequestContext("other"))
    candidate = await engine.score(prompt, completion, RequestContext("gate", candidate_path=adapter))
    await engine.activate("gate", release("gate", "rel-cand"), adapter)
    assert max_gap(await engine.score(prompt, completion, CTX), candidate) < 1e-5
    assert max_gap(await engine.score(prompt, completion, RequestContext("other")), base) < 1e-5
    await engine.activate("gate", None, None)
    assert max_gap(await engine.score(prompt, completion, CTX), base) < 1e-5
    pinned = await engine.score(prompt, completion, RequestContext("gate", release_id="rel-cand"))
    assert max_gap(pinned, candidate) < 1e-5
    with pytest.raises(NotFound):
        await engine.score(prompt, completion, RequestContext("gate", release_id="rel-unknown"))


async def test_scoring_the_base_while_a_candidate_request_decodes_disturbs_neither(engine, adapter, rollout):
    prompt, completion = rollout
    candidate_ctx = RequestContext("gate", candidate_path=adapter)
    base = await engine.score(prompt, completion, CTX)
    body = ask(min_tokens=16, ignore_eos=True)
    alone = await engine.complete(Dialect.CHAT, body, candidate_ctx)
    stream = await engine.stream(Dialect.CHAT, {**body, "stream": True}, candidate_ctx)  # its first token is out
    scores = await engine.score(prompt, completion, CTX)
    frames = [frame async for frame in stream.frames()]
    assert frames[-1].terminal and max_gap(scores, base) < 1e-5
    during, recorded = stream.result().training, alone.training
    assert during is not None and recorded is not None
    assert during["completion_token_ids"] == recorded["completion_token_ids"]
    # What the candidate recorded while decoding is what scoring it under the candidate gives.
    rescored = await engine.score(recorded["prompt_token_ids"], recorded["completion_token_ids"], candidate_ctx)
    assert max_gap(rescored, recorded["logprobs"]) < 1e-3


async def test_an_answer_is_scored_as_its_text_then_end_of_sequence_after_the_rendered_request(
    engine, tokenizer, adapter
):
    body = ask()
    prompt = render_prompt_ids(tokenizer, body["messages"])
    for ctx in (CTX, RequestContext("gate", candidate_path=adapter)):
        scores = await engine.score_answer(body, "Paris", ctx)
        ids = tokenizer("Paris", add_special_tokens=False)["input_ids"]
        assert max_gap(scores, await engine.score(prompt, [*ids, tokenizer.eos_token_id], ctx)) < 1e-5
    # The model knows the answer: starting the reply with it is far likelier than starting with a wrong city.
    right, wrong = await engine.score_answer(body, "Paris", CTX), await engine.score_answer(body, "Berlin", CTX)
    assert right[0] > wrong[0] + 3.0


@pytest.mark.parametrize(
    ("prompt", "completion", "field"),
    [
        ([], [5], "prompt_ids"),
        ("hello", [5], "prompt_ids"),
        ([1, 2.0], [5], "prompt_ids"),
        ([1, True], [5], "prompt_ids"),
        ([1, -1], [5], "prompt_ids"),
        ([1, 2], [], "completion_ids"),
        ([1, 2], [49152], "completion_ids"),
        ([1, 2], None, "completion_ids"),
        ([1] * 8000, [5] * 200, "completion_ids"),
    ],
    ids=["empty", "text", "float", "bool", "negative", "no-completion", "past-vocabulary", "none", "too-long"],
)
async def test_token_ids_that_cannot_be_scored_are_refused_naming_the_field(engine, prompt, completion, field):
    with pytest.raises(BadRequest) as refused:
        await engine.score(prompt, completion, CTX)
    assert refused.value.field == field


async def test_an_upstream_provider_cannot_score_completions():
    engine = UpstreamEngine(InferenceSettings(upstream_url="http://127.0.0.1:9/v1", upstream_api="openai"))
    assert not engine.scores_completions
    with pytest.raises(NotImplementedError, match="UpstreamEngine cannot score completions"):
        await engine.score([1, 2], [3], CTX)
    with pytest.raises(NotImplementedError, match="UpstreamEngine cannot score completions"):
        await engine.score_answer(ask(), "Paris", CTX)


async def test_a_constrained_completion_follows_its_schema_and_records_the_unmasked_log_probs(engine):
    """Constrained sampling masks the distribution; the record keeps the model's own log-probs of each chosen
    token, the quantity the trainer recomputes, so importance ratios compare like with like."""
    schema = {
        "type": "array",
        "minItems": 3,
        "maxItems": 3,
        "items": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01},
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "three", "schema": schema}}
    body = ask(temperature=0.7, seed=3, max_tokens=40, response_format=response_format)
    completion = await engine.complete(Dialect.CHAT, body, CTX)
    text = completion.body["choices"][0]["message"]["content"]
    values = json.loads(text)
    assert len(values) == 3 and all(0 <= v <= 1 and round(v, 2) == v for v in values)
    assert completion.body["choices"][0]["finish_reason"] == "stop"
    training = completion.training
    assert training is not None
    scores = await engine.score(training["prompt_token_ids"], training["completion_token_ids"], CTX)
    assert max_gap(scores, training["logprobs"]) < 1e-3
