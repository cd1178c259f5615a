"""LoRA releases on the local engine: per-scenario adapters, candidates, pinning, and switching under load."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from reef.core.errors import NotFound
from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext
from reef.inference.local import LocalEngine, load_base_model, render_prompt_ids

pytestmark = pytest.mark.model

QUESTION = "What is the capital of France? Answer in one word."


def train_adapter(model_dir: Path, out_dir: Path, answer: str, steps: int = 6) -> Path:
    """A tiny LoRA taught (plain peft + torch, a handful of steps) to answer QUESTION with `answer`."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model, tokenizer = load_base_model(model_dir, "cpu", "float32")
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    prompt = render_prompt_ids(tokenizer, [{"role": "user", "content": QUESTION}])
    completion = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = torch.tensor([prompt + completion])
    labels = ids.clone()
    labels[0, : len(prompt)] = -100
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    model.train()
    for _ in range(steps):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(out_dir)
    return out_dir


def release(scenario: str, release_id: str) -> Release:
    return Release(release_id, scenario, None, "content", "training", 1, "sft", {}, 0.0)


def ask(**extra) -> dict:
    return {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0, "max_tokens": 8, **extra}


async def drain(frames) -> list:
    return [frame async for frame in frames]


def text_of(completion) -> str:
    return completion.body["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def rome_adapter(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_adapter(model_dir, tmp_path_factory.mktemp("rome"), "Rome")


@pytest.fixture(scope="module")
def engine(local_settings: InferenceSettings) -> Iterator[LocalEngine]:
    engine = LocalEngine(local_settings.model_copy(update={"max_resident_adapters": 1}))
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.aclose())


async def test_an_adapter_changes_its_scenarios_answer_and_leaves_other_scenarios_alone(engine, rome_adapter):
    base = text_of(await engine.complete(Dialect.CHAT, ask(), RequestContext("tuned")))
    assert "Paris" in base
    await engine.activate("tuned", release("tuned", "rel-rome"), rome_adapter)
    assert engine.active_release_id("tuned") == "rel-rome"
    tuned, other = await asyncio.gather(
        engine.complete(Dialect.CHAT, ask(), RequestContext("tuned")),
        engine.complete(Dialect.CHAT, ask(), RequestContext("other")),
    )
    assert "Rome" in text_of(tuned) and tuned.release_id == "rel-rome"
    assert text_of(other) == base and other.release_id is None
    await engine.activate("tuned", None, None)
    back = await engine.complete(Dialect.CHAT, ask(), RequestContext("tuned"))
    assert text_of(back) == base and back.release_id is None


async def test_a_candidate_path_serves_one_request_and_a_pinned_release_is_honoured(engine, rome_adapter):
    candidate = await engine.complete(Dialect.CHAT, ask(), RequestContext("evaluated", candidate_path=rome_adapter))
    assert "Rome" in text_of(candidate)
    assert engine.active_release_id("evaluated") is None
    await engine.activate("pinned", release("pinned", "rel-pin"), rome_adapter)
    await engine.activate("pinned", None, None)
    pinned = await engine.complete(Dialect.CHAT, ask(), RequestContext("pinned", release_id="rel-pin"))
    assert "Rome" in text_of(pinned) and pinned.release_id == "rel-pin"
    with pytest.raises(NotFound):
        await engine.complete(Dialect.CHAT, ask(), RequestContext("pinned", release_id="rel-unknown"))


async def test_activating_a_new_release_while_eight_requests_stream_loses_none(
    engine, rome_adapter, model_dir, tmp_path
):
    await engine.activate("busy", release("busy", "rel-1"), rome_adapter)
    body = ask(stream=True, max_tokens=12, min_tokens=12, ignore_eos=True)
    streams = [await engine.stream(Dialect.CHAT, body, RequestContext("busy")) for _ in range(8)]
    iterators = [stream.frames() for stream in streams]
    firsts = [await iterator.__anext__() for iterator in iterators]
    # A second adapter directory (a copy: same weights, new release) while all eight are mid-stream; with
    # max_resident_adapters=1 the first must stay loaded until its requests finish.
    second = tmp_path / "rel-2"
    second.mkdir()
    for file in rome_adapter.iterdir():
        (second / file.name).write_bytes(file.read_bytes())
    await engine.activate("busy", release("busy", "rel-2"), second)
    rests = await asyncio.gather(*(drain(iterator) for iterator in iterators))
    assert all(first and rest[-1].terminal for first, rest in zip(firsts, rests, strict=True))
    results = [stream.result() for stream in streams]
    assert all(r.complete and r.usage["completion_tokens"] == 12 for r in results)
    assert {stream.release_id for stream in streams} == {"rel-1"}
    after = await engine.complete(Dialect.CHAT, ask(), RequestContext("busy"))
    assert after.release_id == "rel-2" and "Rome" in text_of(after)
