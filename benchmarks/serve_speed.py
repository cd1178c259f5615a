"""`reef serve` on the embedded engine, through HTTP, beside llama.cpp's own loop on the same weights, in one run.

For each weight format the llama.cpp forward can serve (`--dtypes`: `gguf`, the shipped file's own blocks, e.g.
Q4_1; `float16`, `float32`; `bfloat16` where this CPU multiplies it natively), prints tokens/s of:
- llama.cpp's own loop (one `llama_decode` a token, its C greedy sampler, the same prompt ids, end of sequence
  banned; through llama-cpp-python's bindings): the anchor;
- one streaming request through `reef serve --inference.dtype D` (HTTP, `min_tokens` = `max_tokens`), and as a
  ratio to the anchor on the shipped file;
- 8 concurrent requests through it (aggregate), and as a ratio to its own single request;
- how far the log-probs Reef records for sampled tokens are from a float32 recomputation (the training forward);
then plain transformers `generate` on the same threads, and what `--inference.dtype auto` chose here.
Each rate is the best of `--repeats` runs. Reef and the anchor use every core (`--threads`).

    python benchmarks/serve_speed.py [--dtypes gguf,float16,float32] [--new-tokens 128] [--repeats 3]
                                     [--baseline-ref REF]   # also serve each dtype from that commit's build
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_engine import QUESTIONS, float32_deltas, plain_generate  # noqa: E402 - benchmarks/local_engine.py, beside this script
from proxy import checkout  # noqa: E402 - benchmarks/proxy.py, beside this script

from reef.core.settings import InferenceSettings  # noqa: E402
from reef.inference.local import llamacpp, load_base_model, render_prompt_ids  # noqa: E402
from reef.inference.local.engine import llamacpp_forward  # noqa: E402
from reef.inference.local.llamacpp_amx import cpu_info  # noqa: E402
from reef.inference.local.model_files import resolve_model_path  # noqa: E402
from tests.fakes.reef_process import ReefProcess  # noqa: E402


def body(index: int, new_tokens: int, **extra: object) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": QUESTIONS[index % len(QUESTIONS)]}],
        "temperature": 0,
        "max_tokens": new_tokens,
        "min_tokens": new_tokens,
        "ignore_eos": True,
        **extra,
    }


def llamacpp_loop(gguf: Path, prompt: list[int], new_tokens: int, threads: int, repeats: int) -> float:
    """Tokens/s of llama.cpp's own loop on `gguf` (as its `simple` example: one `llama_decode` a token, its C greedy
    sampler with end of sequence banned), after `prompt` (prefill included); best of `repeats`."""
    import ctypes

    import llama_cpp as lib

    lib.llama_backend_init()
    model = lib.llama_model_load_from_file(str(gguf).encode(), lib.llama_model_default_params())
    vocab = lib.llama_model_get_vocab(model)
    params = lib.llama_context_default_params()
    params.n_ctx = 1024
    params.n_threads = params.n_threads_batch = threads
    params.no_perf = True
    ctx = lib.llama_init_from_model(model, params)
    sampler = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    ban = (lib.llama_logit_bias * 1)(lib.llama_logit_bias(lib.llama_vocab_eos(vocab), -float("inf")))
    lib.llama_sampler_chain_add(sampler, lib.llama_sampler_init_logit_bias(lib.llama_vocab_n_tokens(vocab), 1, ban))
    lib.llama_sampler_chain_add(sampler, lib.llama_sampler_init_greedy())
    best = 0.0
    try:
        for _ in range(repeats):
            lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
            started = time.perf_counter()
            tokens = (ctypes.c_int32 * len(prompt))(*prompt)
            batch = lib.llama_batch_get_one(tokens, len(prompt))
            for _ in range(new_tokens):
                if lib.llama_decode(ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed")
                token = (ctypes.c_int32 * 1)(lib.llama_sampler_sample(sampler, ctx, -1))
                batch = lib.llama_batch_get_one(token, 1)
            best = max(best, new_tokens / (time.perf_counter() - started))
    finally:
        lib.llama_sampler_free(sampler)
        lib.llama_free(ctx)
        lib.llama_model_free(model)
    return best


async def through_http(url: str, concurrent: int, new_tokens: int, repeats: int) -> float:
    """Aggregate tokens/s of `concurrent` streaming requests through Reef, best of runs. The client reads the
    stream raw and counts the tokens from its usage at the end: a client parsing every event would take CPU from
    the server on a machine of few cores (as a Python SDK does)."""
    host, port = url.removeprefix("http://").split(":")

    async def one(index: int) -> int:
        payload = json.dumps(body(index, new_tokens, stream=True, stream_options={"include_usage": True})).encode()
        reader, writer = await asyncio.open_connection(host, int(port))
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        head += f"x-reef-scenario: bench\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + payload)
        received = bytearray()
        while chunk := await reader.read(65536):
            received += chunk
        writer.close()
        if not received.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(received[:2000].decode(errors="replace"))
        usage = re.findall(rb'"completion_tokens":(\d+)', bytes(received))
        return int(usage[-1]) if usage else 0

    await one(0)  # warm-up
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        counts = await asyncio.gather(*(one(i) for i in range(concurrent)))
        assert all(count == new_tokens for count in counts), counts
        best = max(best, sum(counts) / (time.perf_counter() - started))
    return best


def recorded_gap(url: str, model: object) -> float:
    """Mean |recorded − float32| log-prob over 4 sampled completions of 64 tokens (from their records); `model`: the
    float32 transformers model."""
    trainings = []
    with httpx.Client(timeout=600) as client:
        for index in range(4):
            response = client.post(
                url + "/v1/chat/completions",
                json=body(index, 64, temperature=1.0, seed=index, ignore_eos=False, min_tokens=0),
                headers={"x-reef-scenario": "bench"},
            )
            response.raise_for_status()
            record_id = response.headers["x-reef-agent-record-id"]
            trainings.append(
                client.get(f"{url}/reef/scenarios/bench/records/{record_id}").json()["payload"]["training"]
            )
    return float(float32_deltas(model, trainings).abs().mean())


def serve(flags: list[str], model: object, new_tokens: int, repeats: int, cwd: Path | None = None) -> Rates:
    """One `reef serve` (this build, or the checkout `cwd`) with `flags`: its rates and its log-prob gap."""
    with tempfile.TemporaryDirectory(prefix="reef-serve-speed-") as state:
        reef = ReefProcess(Path(state), *flags, cwd=cwd).start(timeout_s=600)  # `-m reef` from `cwd`: its build
        try:
            one = asyncio.run(through_http(reef.url, 1, new_tokens, repeats))
            eight = asyncio.run(through_http(reef.url, 8, new_tokens, repeats))
            return Rates(one, eight, recorded_gap(reef.url, model))
        finally:
            reef.stop()


@dataclasses.dataclass
class Rates:
    one: float
    eight: float
    gap: float


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--dtypes", default="gguf,float16,float32")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="Reef's and the loop's threads; 0: Reef's default")
    parser.add_argument("--cache-dir", type=Path, default=Path("~/.cache/reef/models").expanduser())
    parser.add_argument("--baseline-ref", help="also serve each dtype from this git ref's build (before/after)")
    args = parser.parse_args()
    if not llamacpp.available():
        print("llama-cpp-python is required: make setup-llamacpp", file=sys.stderr)
        return 2
    threads = args.threads or llamacpp.default_threads()
    settings = InferenceSettings(
        backend="local", model_path=args.model, model_cache_dir=args.cache_dir, device="cpu", threads=threads
    )
    model_dir = resolve_model_path(args.model, args.cache_dir)
    model, tokenizer = load_base_model(model_dir, "cpu", "float32")
    prompt = render_prompt_ids(tokenizer, body(0, args.new_tokens)["messages"])
    flags = ["--inference.model-path", args.model, "--inference.model-cache-dir", str(args.cache_dir)]
    flags += ["--inference.threads", str(args.threads)] if args.threads else []
    rows: list[tuple[str, ...]] = []
    anchor = 0.0
    with contextlib.ExitStack() as stack:
        baseline = stack.enter_context(checkout(args.baseline_ref)) if args.baseline_ref else None
        for dtype in args.dtypes.split(","):
            forward = llamacpp_forward(settings.model_copy(update={"dtype": dtype}), model, "cpu")
            weights, precision = forward.weights, forward.precision
            forward.close()
            loop = llamacpp_loop(weights, prompt, args.new_tokens, threads, args.repeats)
            anchor = anchor or (loop if dtype == "gguf" else 0.0)
            builds = {"reef": None, f"@{args.baseline_ref}": baseline} if baseline else {"reef": None}
            for build, cwd in builds.items():
                rates = serve([*flags, "--inference.dtype", dtype], model, args.new_tokens, args.repeats, cwd)
                rows.append(
                    (
                        f"{dtype} ({precision})",
                        build,
                        f"{loop:.1f}",
                        f"{rates.one:.1f}" + (f" ({rates.one / anchor:.2f}x)" if anchor else ""),
                        f"{rates.eight:.1f} ({rates.eight / rates.one:.2f}x)",
                        f"{rates.gap:.4f}",
                    )
                )
    torch.set_num_threads(threads)
    plain = plain_generate(model_dir, 1, args.new_tokens)  # the same first question
    info = cpu_info() or {}
    flags_here = sorted(f for f in (info.get("flags") or "").split() if f.startswith(("avx", "amx", "f16c", "fma")))
    print(f"\nCPU: {info.get('model name', platform.processor())}, {threads} threads; flags: {' '.join(flags_here)}")
    print(f"{args.new_tokens} new tokens a request, best of {args.repeats}; tok/s")
    header = ("weights", "build", "llama.cpp loop", "1 request (vs loop on gguf)", "8 concurrent (vs 1)", "|Δ logp|")
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)))
    print(f"plain transformers generate: {plain:.1f} tok/s")
    print("|Δ logp|: mean |recorded − float32 recomputed| log-prob of 4 sampled 64-token answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
