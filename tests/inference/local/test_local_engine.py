"""The local engine with the real SmolLM2: dialects, streaming, batching, token capture, back-pressure."""

from __future__ import annotations

import asyncio
import math
import threading

import orjson
import pytest

from reef.core.errors import BadRequest, Unavailable
from reef.core.scenarios import Dialect
from reef.inference.base import RequestContext
from reef.inference.local import LocalEngine
from reef.inference.sse import parse_event

pytestmark = pytest.mark.model

QUESTION = "What is the capital of France? Answer in one word."
CTX = RequestContext(scenario="geo")


def chat(question: str = QUESTION, **extra) -> dict:
    return {"model": "smollm2", "messages": [{"role": "user", "content": question}], "temperature": 0, **extra}


async def test_a_greedy_chat_request_answers_paris_with_usage_and_token_capture(engine, tokenizer):
    completion = await engine.complete(Dialect.CHAT, chat(max_tokens=16), CTX)
    body = orjson.loads(completion.raw)
    text = body["choices"][0]["message"]["content"]
    assert "Paris" in text
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
    training = completion.training
    assert training is not None and "training" not in body
    ids, logprobs = training["completion_token_ids"], training["logprobs"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert len(logprobs) == len(ids) and all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
    assert body["usage"] == {
        "prompt_tokens": len(training["prompt_token_ids"]),
        "completion_tokens": len(ids),
        "total_tokens": len(training["prompt_token_ids"]) + len(ids),
    }
    assert completion.release_id is None and completion.request["messages"][0]["content"] == QUESTION


async def test_the_messages_dialect_answers_paris_in_an_anthropic_message(engine):
    body = {"model": "smollm2", "max_tokens": 16, "temperature": 0, "messages": [{"role": "user", "content": QUESTION}]}
    completion = await engine.complete(Dialect.MESSAGES, body, CTX)
    assert completion.body["type"] == "message"
    assert "Paris" in completion.body["content"][0]["text"]
    assert completion.body["usage"]["output_tokens"] == len(completion.training["completion_token_ids"])


async def test_a_chat_stream_sends_openai_chunks_token_by_token_and_ends_with_a_terminal_done(engine, tokenizer):
    stream = await engine.stream(
        Dialect.CHAT, chat(max_tokens=16, stream=True, stream_options={"include_usage": True}), CTX
    )
    frames = [frame async for frame in stream.frames()]
    assert frames[-1].data == b"data: [DONE]\n\n" and frames[-1].terminal
    assert not any(frame.terminal for frame in frames[:-1])
    chunks = [parse_event(frame.data).data for frame in frames[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
    assert len([p for p in pieces if p]) > 2  # token by token, not one blob
    text = "".join(pieces)
    assert "Paris" in text
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    result = stream.result()
    assert result.complete and result.body["choices"][0]["message"]["content"] == text
    assert tokenizer.decode(result.training["completion_token_ids"], skip_special_tokens=True) == text


async def test_a_messages_stream_ends_with_message_stop_and_answers_paris(engine):
    body = {
        "model": "m",
        "max_tokens": 16,
        "temperature": 0,
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    stream = await engine.stream(Dialect.MESSAGES, body, CTX)
    events = [parse_event(frame.data) async for frame in stream.frames()]
    assert events[0].name == "message_start" and events[-1].name == "message_stop"
    text = "".join(e.data["delta"].get("text", "") for e in events if e.name == "content_block_delta")
    assert "Paris" in text
    assert stream.result().body["content"][0]["text"] == text


async def test_eight_concurrent_requests_all_complete_and_batching_does_not_change_greedy_answers(engine):
    alone = await engine.complete(Dialect.CHAT, chat(max_tokens=12), CTX)
    questions = [
        QUESTION,
        "Name a color.",
        "What is 2 + 2?",
        "Say hello.",
        "Name a fruit.",
        "What is water?",
        "Count to three.",
        "Name an animal.",
    ]
    completions = await asyncio.gather(*(engine.complete(Dialect.CHAT, chat(q, max_tokens=12), CTX) for q in questions))
    assert len(completions) == 8
    assert all(c.body["choices"][0]["finish_reason"] in ("stop", "length") for c in completions)
    assert completions[0].body["choices"][0]["message"] == alone.body["choices"][0]["message"]


async def test_responses_dialect_and_client_logprobs_are_honoured(engine):
    completion = await engine.complete(
        Dialect.RESPONSES, {"model": "m", "input": QUESTION, "temperature": 0, "max_output_tokens": 12}, CTX
    )
    assert completion.body["object"] == "response" and "Paris" in completion.body["output"][0]["content"][0]["text"]
    completion = await engine.complete(Dialect.CHAT, chat(max_tokens=4, logprobs=True, top_logprobs=3), CTX)
    content = completion.body["choices"][0]["logprobs"]["content"]
    assert len(content) == 4 and len(content[0]["top_logprobs"]) == 3
    assert content[0]["logprob"] == pytest.approx(completion.training["logprobs"][0])


async def test_min_tokens_ignore_eos_stop_strings_and_seeds_shape_the_answer(engine):
    long = await engine.complete(Dialect.CHAT, chat(max_tokens=20, min_tokens=20, ignore_eos=True), CTX)
    assert long.usage["completion_tokens"] == 20 and long.body["choices"][0]["finish_reason"] == "length"
    stopped = await engine.complete(Dialect.CHAT, chat(max_tokens=16, stop=["Paris"]), CTX)
    assert "Paris" not in stopped.body["choices"][0]["message"]["content"]
    assert stopped.body["choices"][0]["finish_reason"] == "stop"
    seeded = chat("Tell me a word.", max_tokens=8, temperature=1.0, seed=7)
    first, second = [await engine.complete(Dialect.CHAT, seeded, CTX) for _ in range(2)]
    assert first.body["choices"][0]["message"] == second.body["choices"][0]["message"]


async def test_a_harness_system_prompt_and_tools_reach_the_prompt_without_breaking_the_request(engine, tokenizer):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    ctx = RequestContext(scenario="geo", system_prompt="Always answer in French.")
    completion = await engine.complete(Dialect.CHAT, chat(max_tokens=4, tools=tools), ctx)
    prompt = tokenizer.decode(completion.training["prompt_token_ids"])
    assert "Always answer in French." in prompt and QUESTION in prompt
    assert (await engine.count_tokens({"messages": [{"role": "user", "content": QUESTION}]}, CTX))["input_tokens"] > 5


async def test_invalid_sampling_fields_are_refused_naming_the_field(engine):
    with pytest.raises(BadRequest) as refused:
        await engine.complete(Dialect.CHAT, chat(temperature=7), CTX)
    assert refused.value.field == "temperature"


async def test_a_full_queue_answers_unavailable_with_a_retry_delay(local_settings):
    engine = LocalEngine(local_settings.model_copy(update={"max_queue": 1, "max_batch_size": 1}))
    await engine.start()
    try:
        body = chat(max_tokens=4)
        results = await asyncio.gather(
            *(engine.complete(Dialect.CHAT, body, CTX) for _ in range(4)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, Unavailable)]
        assert refused and all(r.retry_after_s > 0 for r in refused)
        served = [r for r in results if r not in refused]
        assert served and all(r.usage["completion_tokens"] == 4 for r in served)
    finally:
        await engine.aclose()


async def test_a_stream_closed_early_is_recorded_incomplete_and_stops_decoding(engine):
    body = chat(max_tokens=200, min_tokens=200, ignore_eos=True, stream=True)
    stream = await engine.stream(Dialect.CHAT, body, CTX)
    frames = stream.frames()
    await frames.__anext__()
    await stream.aclose()
    after = await engine.complete(Dialect.CHAT, chat(max_tokens=4), CTX)
    result = stream.result()
    assert not result.complete and len(result.training["completion_token_ids"]) < 200
    assert after.usage["completion_tokens"] == 4


async def test_inference_threads_sets_the_engines_torch_threads(local_settings):
    import torch

    before = torch.get_num_threads()
    engine = LocalEngine(local_settings.model_copy(update={"threads": 3}))
    try:
        await engine.start()
        # torch applies the count to each thread when it first runs an op there (the scheduler's thread, say).
        seen: list[int] = []
        thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        thread.start()
        thread.join()
        assert seen == [3]
    finally:
        await engine.aclose()
        torch.set_num_threads(before)
