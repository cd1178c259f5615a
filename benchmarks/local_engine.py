"""Local engine throughput on this machine: one stream, 8 and 16 concurrent, versus plain `model.generate`.

Every request decodes exactly `--new-tokens` tokens (min_tokens = max_tokens, ignore_eos), greedy.
Prints a table: tokens/s (each as a ratio to plain `generate` on the same weights and threads, measured in the
same run), first-token latency, adapter activation time, peak RSS, and how far the log-probs the engine records
for sampled (temperature 1) completions are from a float32 transformers recomputation of the same tokens.

    python benchmarks/local_engine.py [--model smollm2] [--new-tokens 128] [--dtype auto|float32|bfloat16|float16|gguf]
                                      [--forward torch llama.cpp] [--threads N]

With both forwards (the default where llama-cpp-python is installed), each runs in its own process and prints its
own table; the engine's default forward is torch.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.core.settings import InferenceSettings
from reef.inference.base import RequestContext
from reef.inference.local import LocalEngine, llamacpp, load_base_model, render_prompt_ids

QUESTIONS = [
    "Describe the sea.",
    "Explain how rain forms.",
    "Write about mountains.",
    "Tell a story about a cat.",
    "Describe a city at night.",
    "Explain photosynthesis.",
    "Write about the moon.",
    "Describe a forest walk.",
    "Explain how a bridge stands.",
    "Write about the ocean floor.",
    "Tell a story about a dog.",
    "Describe a winter morning.",
    "Explain why the sky is blue.",
    "Write about a desert.",
    "Describe a busy market.",
    "Explain how bees make honey.",
]  # 16 questions: 16 streams share only the system prompt (the engine computes a shared prefix once)


def request(index: int, new_tokens: int) -> dict:
    question = QUESTIONS[index % len(QUESTIONS)]
    return {
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "stream": True,
        "max_tokens": new_tokens,
        "min_tokens": new_tokens,
        "ignore_eos": True,
    }


async def one_stream(engine: LocalEngine, index: int, new_tokens: int) -> tuple[int, float]:
    """(completion tokens, seconds to the first content frame)."""
    started = time.perf_counter()
    stream = await engine.stream(Dialect.CHAT, request(index, new_tokens), RequestContext("bench"))
    first = None
    async for frame in stream.frames():
        if first is None and b'"content":"' in frame.data and b'"content":""' not in frame.data:
            first = time.perf_counter() - started
    return stream.result().usage["completion_tokens"], first or 0.0


async def concurrent(engine: LocalEngine, count: int, new_tokens: int) -> tuple[float, float]:
    """(aggregate tokens/s, median first-token latency in s) of `count` simultaneous streams."""
    started = time.perf_counter()
    results = await asyncio.gather(*(one_stream(engine, i, new_tokens) for i in range(count)))
    elapsed = time.perf_counter() - started
    return sum(tokens for tokens, _ in results) / elapsed, statistics.median(first for _, first in results)


def plain_generate(model_dir: Path, count: int, new_tokens: int) -> float:
    """Tokens/s of `count` requests answered one at a time by `model.generate` (the same work)."""
    model, tokenizer = load_base_model(model_dir, "cpu", "auto")
    tokens = 0
    started = time.perf_counter()
    with torch.inference_mode():
        for index in range(count):
            prompt = render_prompt_ids(tokenizer, request(index, new_tokens)["messages"])
            out = model.generate(
                torch.tensor([prompt]),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
            tokens += out.shape[1] - len(prompt)
    return tokens / (time.perf_counter() - started)


async def recorded_gap(engine: LocalEngine, model_dir: Path, count: int = 8) -> tuple[float, float, float, int]:
    """(mean |Δ|, max |Δ|, std of exp(Δ), tokens): Δ = recorded log-prob − float32 recomputation, on `count`
    concurrently sampled completions (temperature 1)."""
    bodies = [
        {"messages": request(i, 64)["messages"], "temperature": 1.0, "seed": i, "max_tokens": 64} for i in range(count)
    ]
    ctx = RequestContext("bench")
    completions = await asyncio.gather(*(engine.complete(Dialect.CHAT, body, ctx) for body in bodies))
    model, _ = load_base_model(model_dir, "cpu", "float32")
    trainings = [completion.training for completion in completions]
    assert all(training is not None for training in trainings)
    delta = float32_deltas(model, trainings)  # type: ignore[arg-type]
    return float(delta.abs().mean()), float(delta.abs().max()), float(delta.exp().std()), int(delta.numel())


def float32_deltas(model: object, trainings: list[dict]) -> torch.Tensor:
    """Recorded log-prob − `model`'s (float32) recomputation, for every token of the records' `training` fields."""
    deltas: list[torch.Tensor] = []
    with torch.inference_mode():
        for training in trainings:
            prompt, ids = training["prompt_token_ids"], training["completion_token_ids"]
            logits = model(input_ids=torch.tensor([prompt + ids[:-1]])).logits[0, len(prompt) - 1 :]  # type: ignore[operator]
            exact = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(ids).unsqueeze(1)).squeeze(1)
            deltas.append(torch.tensor(training["logprobs"]) - exact)
    return torch.cat(deltas)


def make_adapter(model_dir: Path, out_dir: Path) -> Path:
    """A rank-16 LoRA on all seven projections (untrained: activation time does not depend on the values)."""
    from peft import LoraConfig, get_peft_model

    model, _ = load_base_model(model_dir, "cpu", "auto")
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=targets)).save_pretrained(out_dir)
    return out_dir


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--cache-dir", type=Path, default=Path("~/.cache/reef/models"))
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16", "gguf"])
    parser.add_argument(
        "--forward",
        nargs="+",
        choices=["torch", "llama.cpp"],
        default=["torch", "llama.cpp"] if llamacpp.available() else ["torch"],
        help="the forwards to measure (default: both where llama-cpp-python is installed), each in its own process",
    )
    parser.add_argument("--threads", type=int, default=0, help="the engine's threads (0: its default)")
    args = parser.parse_args()
    if len(args.forward) > 1:  # one process each, so that each table's peak RSS is its own
        for forward in args.forward:
            options = ["--model", args.model, "--new-tokens", str(args.new_tokens), "--cache-dir", str(args.cache_dir)]
            options += ["--dtype", args.dtype, "--threads", str(args.threads), "--forward", forward]
            subprocess.run([sys.executable, __file__, *options], check=True)
        return
    args.forward = args.forward[0]
    settings = InferenceSettings(
        backend="local",
        model_path=args.model,
        model_cache_dir=args.cache_dir,
        device="cpu",
        dtype=args.dtype,
        forward=args.forward,
        threads=args.threads,
        max_batch_size=16,
    )
    engine = LocalEngine(settings)
    started = time.perf_counter()
    await engine.start()
    rows = [("engine start (model load)", f"{time.perf_counter() - started:.2f} s")]
    await concurrent(engine, 1, 4)  # warm-up
    single, single_first = await concurrent(engine, 1, args.new_tokens)
    eight, eight_first = await concurrent(engine, 8, args.new_tokens)
    sixteen, sixteen_first = await concurrent(engine, 16, args.new_tokens)
    assert engine.model_dir is not None
    with tempfile.TemporaryDirectory() as tmp:
        adapter = make_adapter(engine.model_dir, Path(tmp) / "adapter")
        release = Release("bench-1", "bench", None, "c", "training", 1, "bench", {}, 0.0)
        started = time.perf_counter()
        await engine.activate("bench", release, adapter)
        activation_s = time.perf_counter() - started
    await engine.activate("bench", None, None)
    gap_mean, gap_max, ratio_std, gap_tokens = await recorded_gap(engine, engine.model_dir)
    forward = (
        "transformers" if engine.compact is None else f"{type(engine.compact).__name__}, {engine.compact.precision}"
    )
    await engine.aclose()
    # The baseline gets the engine's threads (llama.cpp's default is every core; torch's, every core but one).
    threads = args.threads or (llamacpp.default_threads() if args.forward == "llama.cpp" else torch.get_num_threads())
    torch.set_num_threads(threads)
    plain = plain_generate(engine.model_dir, 8, args.new_tokens)
    rows += [
        ("forward", forward),
        ("plain model.generate, 8 one at a time (baseline)", f"{plain:.1f} tok/s"),
        (f"1 stream, {args.new_tokens} new tokens", f"{single:.1f} tok/s  ({single / plain:.2f}x baseline)"),
        ("8 concurrent streams (aggregate)", f"{eight:.1f} tok/s  ({eight / plain:.1f}x baseline)"),
        ("16 concurrent streams (aggregate)", f"{sixteen:.1f} tok/s  ({sixteen / plain:.1f}x baseline)"),
        (
            "first-token latency: 1 / 8 / 16 concurrent (median)",
            f"{single_first * 1000:.0f} / {eight_first * 1000:.0f} / {sixteen_first * 1000:.0f} ms",
        ),
        ("adapter activation (r=16, 7 projections)", f"{activation_s * 1000:.0f} ms"),
        (
            f"recorded − float32 log-prob ({gap_tokens} sampled tokens)",
            f"mean |Δ| {gap_mean:.4f}, max {gap_max:.3f}, std of exp(Δ) {ratio_std:.4f}",
        ),
        ("peak RSS", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"),
        ("threads (engine and baseline)", str(threads)),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\nLocal engine ({args.model}, CPU, --forward {args.forward}, --dtype {args.dtype})\n" + "-" * (width + 30))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    asyncio.run(main())
