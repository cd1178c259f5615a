"""Decoding through `reef serve` over HTTP with 1 and with 2 (or more) threads, on the torch or llama.cpp forward.

The engine's matmul threads share the machine with the server's asyncio loop (HTTP, SSE frames, recording). This
starts `reef serve` on the embedded SmolLM2 once per forward and thread count and streams 1, 8 and 16 concurrent chat
completions of exactly `--new-tokens` tokens (greedy, `min_tokens` = `max_tokens`, `ignore_eos`) through
`/v1/chat/completions`, counting the tokens each stream's frames carry. Every rate is printed with its ratio to
the first configuration's (first forward, first thread count), measured in the same run.

    python benchmarks/serving_threads.py [--threads 1 2] [--forward torch llama.cpp] [--new-tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from reef.demo.server import ReefServer, free_port

QUESTIONS = ["Describe the sea.", "Explain how rain forms.", "Write about mountains.", "Tell a story about a cat."]


async def one_stream(client: httpx.AsyncClient, index: int, new_tokens: int) -> tuple[int, float]:
    """(completion tokens, seconds to the first content frame) of one streamed completion."""
    body = {
        "messages": [{"role": "user", "content": QUESTIONS[index % len(QUESTIONS)]}],
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": new_tokens,
        "min_tokens": new_tokens,
        "ignore_eos": True,
    }
    started = time.perf_counter()
    first, tokens = None, 0
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            frame = json.loads(line[6:])
            if first is None and any(c.get("delta", {}).get("content") for c in frame.get("choices", [])):
                first = time.perf_counter() - started
            if frame.get("usage"):
                tokens = int(frame["usage"]["completion_tokens"])
    return tokens, first or 0.0


async def concurrent(url: str, count: int, new_tokens: int) -> tuple[float, float]:
    """(aggregate tokens/s, median first-token latency in s) of `count` simultaneous streams."""
    async with httpx.AsyncClient(base_url=url, timeout=600, headers={"x-reef-scenario": "bench"}) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(one_stream(client, i, new_tokens) for i in range(count)))
        elapsed = time.perf_counter() - started
    return sum(t for t, _ in results) / elapsed, statistics.median(f for _, f in results)


def measure(forward: str, threads: int, new_tokens: int) -> dict[int, tuple[float, float]]:
    """{streams: (tokens/s, first-token s)} for 1, 8 and 16 streams on a fresh server with `forward`, `threads`."""
    port = free_port()
    with tempfile.TemporaryDirectory() as state:
        command = [
            sys.executable, "-m", "reef.cli.main", "serve", "--inference.model-path", "smollm2",
            "--inference.threads", str(threads), "--inference.max-batch-size", "16", "--inference.forward", forward,
            "--storage.dir", state, "--reef.port", str(port),
        ]  # fmt: skip
        # `--inference.threads` wins over an OMP_NUM_THREADS in the environment.
        with ReefServer(command, f"http://127.0.0.1:{port}", Path(state) / "serve.log") as server:
            server.wait_healthy(300)
            asyncio.run(concurrent(server.url, 1, 8))  # warm-up
            return {n: asyncio.run(concurrent(server.url, n, new_tokens)) for n in (1, 8, 16)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--forward", nargs="+", default=["torch"], choices=["torch", "llama.cpp"])
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    configurations = [(forward, threads) for forward in args.forward for threads in args.threads]
    results = {config: measure(*config, args.new_tokens) for config in configurations}
    baseline = results[configurations[0]]
    first_forward, first_threads = configurations[0]
    print(
        f"\nreef serve over HTTP, {args.new_tokens} new tokens a stream "
        f"(baseline: {first_forward}, {first_threads} thread(s))"
    )
    print(f"{'forward':>9}  {'threads':>7}  {'streams':>7}  {'tok/s':>7}  {'vs baseline':>11}  {'first token':>11}")
    for (forward, threads), rows in results.items():
        for streams, (rate, first) in rows.items():
            ratio = rate / baseline[streams][0]
            print(f"{forward:>9}  {threads:>7}  {streams:>7}  {rate:>7.1f}  {ratio:>10.2f}x  {first * 1000:>8.0f} ms")


if __name__ == "__main__":
    main()
