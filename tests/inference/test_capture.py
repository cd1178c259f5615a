"""Token capture and scoring from vLLM and SGLang answers, on response bodies of the shape those servers send."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef.inference.base import CompletionStream, StreamFrame, StreamResult
from reef.inference.capture import (
    CAPTURE_FIELDS,
    client_view,
    score_request,
    scores_from,
    training_from_chat,
    with_capture,
)
from reef.inference.capture_stream import CapturingStream
from reef.recipes.reports import CitedInference

BODIES = Path(__file__).parent / "bodies"
CAPTURED = {
    "prompt_token_ids": [1, 9690, 198, 4093, 314, 253, 3575, 2, 198],
    "completion_token_ids": [42192, 2],
    "logprobs": [-0.0913, -0.0031],
}


def body(name: str) -> dict:
    return json.loads((BODIES / name).read_text())


@pytest.mark.parametrize("name", ["vllm_chat_completion.json", "sglang_chat_completion.json"])
def test_a_chat_answer_from_vllm_or_sglang_is_captured_as_the_embedded_engine_records_it(name):
    assert training_from_chat(body(name)) == CAPTURED


def test_a_captured_answer_gives_the_rl_recipes_a_policy_sample():
    from reef.core.records import Record

    record = Record.new("s", "inference", {"dialect": "chat", "request": {}, "training": CAPTURED}, created_at=0.0)
    sample = CitedInference.from_record(record).policy_sample()
    assert sample == {
        "prompt_ids": CAPTURED["prompt_token_ids"],
        "completion_ids": [42192, 2],
        "old_logprobs": [-0.0913, -0.0031],
    }


@pytest.mark.parametrize(
    "spoil",
    [
        lambda b: b["choices"][0].pop("token_ids"),
        lambda b: b.pop("prompt_token_ids"),
        lambda b: b["choices"][0].__setitem__("logprobs", None),
        lambda b: b["choices"][0]["logprobs"]["content"].pop(),  # one log-prob short of the ids
        lambda b: b["choices"][0]["logprobs"]["content"][0].__setitem__("logprob", None),
        lambda b: b["choices"][0].__setitem__("token_ids", [42192, "2"]),
        lambda b: b.__setitem__("choices", []),
    ],
)
def test_an_answer_whose_ids_and_logprobs_do_not_line_up_gives_no_capture(spoil):
    answer = body("vllm_chat_completion.json")
    spoil(answer)
    assert training_from_chat(answer) is None


def test_the_request_asks_for_ids_and_logprobs_and_the_client_sees_only_what_it_asked_for():
    request = {"model": "m", "messages": [{"role": "user", "content": "capital of France?"}]}
    assert with_capture(request) == {**request, **CAPTURE_FIELDS}
    assert request == {"model": "m", "messages": [{"role": "user", "content": "capital of France?"}]}
    for name in ("vllm_chat_completion.json", "sglang_chat_completion.json"):
        view = client_view(body(name), request)
        assert "prompt_token_ids" not in view and "token_ids" not in view["choices"][0]
        assert "logprobs" not in view["choices"][0] and view["choices"][0]["message"]["content"] == "Paris"
        asked = client_view(body(name), {**request, "logprobs": True})
        assert asked["choices"][0]["logprobs"]["content"][0]["logprob"] == -0.0913


def test_given_tokens_are_scored_from_vllm_prompt_logprobs():
    path, request = score_request("vllm", "reef-abc", "smollm2", [1, 9690], [42192, 2])
    assert path == "/v1/completions"
    assert request == {"model": "reef-abc", "prompt": [1, 9690, 42192, 2], "max_tokens": 1, "prompt_logprobs": 0}
    assert scores_from("vllm", body("vllm_prompt_logprobs.json"), [42192, 2]) == [-0.0913, -0.0031]


def test_given_tokens_are_scored_from_sglang_input_token_logprobs():
    path, request = score_request("sglang", "smollm2", "smollm2", [1, 9690], [42192, 2])
    assert path == "/generate" and request["input_ids"] == [1, 9690, 42192, 2]
    assert request["return_logprob"] is True and request["logprob_start_len"] == 2 and "lora_path" not in request
    assert score_request("sglang", "reef-abc", "smollm2", [1], [2])[1]["lora_path"] == "reef-abc"
    assert scores_from("sglang", body("sglang_generate_logprobs.json"), [42192, 2]) == [-0.0913, -0.0031]


@pytest.mark.parametrize(
    ("backend", "name"), [("vllm", "vllm_prompt_logprobs.json"), ("sglang", "sglang_generate_logprobs.json")]
)
def test_a_scoring_answer_about_other_tokens_is_an_error_not_a_score(backend, name):
    with pytest.raises(ValueError):
        scores_from(backend, body(name), [42192, 7])
    with pytest.raises(ValueError):
        scores_from(backend, {}, [42192, 2])


class RecordedUpstream:
    """Stands for the OpenAI-compatible server: answers every chat request with a recorded body."""

    def __init__(self, name: str) -> None:
        self.answer = body(name)
        self.requests: list[dict] = []

    async def complete(self, dialect, request, ctx):
        from reef.inference.base import Completion

        self.requests.append(request)
        return Completion(200, json.dumps(self.answer).encode(), self.answer, request, ctx.release_id)


@pytest.mark.parametrize(
    ("backend", "name"), [("vllm", "vllm_chat_completion.json"), ("sglang", "sglang_chat_completion.json")]
)
async def test_a_launched_engine_asks_for_capture_records_it_and_answers_the_client_as_asked(
    monkeypatch, backend, name
):
    import importlib.util

    from reef.core.scenarios import Dialect
    from reef.core.settings import InferenceSettings
    from reef.inference.base import RequestContext
    from reef.inference.launch import LaunchedEngine

    monkeypatch.setattr(importlib.util, "find_spec", lambda module: object())  # vLLM / SGLang are not installed here
    engine = LaunchedEngine(InferenceSettings(backend=backend, model_path="smollm2", served_model_name="smol"), backend)
    engine._upstream = upstream = RecordedUpstream(name)
    request = {"messages": [{"role": "user", "content": "capital of France?"}]}
    completion = await engine.complete(Dialect.CHAT, request, RequestContext("s"))
    assert upstream.requests[0]["logprobs"] is True and upstream.requests[0]["return_token_ids"] is True
    assert completion.training == CAPTURED
    sent = json.loads(completion.raw)
    assert "token_ids" not in sent["choices"][0] and "logprobs" not in sent["choices"][0]
    assert sent["choices"][0]["message"]["content"] == "Paris"


class RecordedStream(CompletionStream):
    """A finished upstream stream replayed frame by frame from a recorded SSE body."""

    def __init__(self, raw: bytes, complete: bool = True) -> None:
        self.request = {}
        self.release_id = None
        self.last_chunk = None
        self.events = [e + b"\n\n" for e in raw.strip().split(b"\n\n")]
        self.complete = complete

    async def frames(self):
        for event in self.events:
            yield StreamFrame(event, terminal=event.startswith(b"data: [DONE]"))

    def result(self) -> StreamResult:
        return StreamResult(body={}, complete=self.complete)

    async def aclose(self) -> None:
        return None


async def test_a_streamed_vllm_answer_is_captured_and_relayed_without_the_fields_reef_asked_for():
    raw = (BODIES / "vllm_chat_stream.sse").read_bytes()
    stream = CapturingStream(RecordedStream(raw), {"messages": [], "stream": True})
    sent = [frame.data async for frame in stream.frames()]
    assert stream.result().training == CAPTURED
    assert len(sent) == 4 and sent[-1].startswith(b"data: [DONE]")
    chunks = [json.loads(frame[len(b"data: ") :]) for frame in sent[:-1]]
    assert all("prompt_token_ids" not in c and "token_ids" not in c["choices"][0] for c in chunks)
    assert all("logprobs" not in c["choices"][0] for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Paris"


async def test_a_stream_cut_short_gives_no_capture():
    raw = (BODIES / "vllm_chat_stream.sse").read_bytes()
    stream = CapturingStream(RecordedStream(raw, complete=False), {"messages": []})
    _ = [frame async for frame in stream.frames()]
    assert stream.result().training is None
