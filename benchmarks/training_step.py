"""Training-step cost of the local backend: LoRA on SmolLM2, a batch of 8 × 128 tokens.

Runs two jobs through the backend and prints: job start overhead for the first job (which starts the fork
server) and for a later one (forked warm), time per optimizer step, and the training process's peak RSS.
Then the distillation step (`sdft`'s forward KL, same samples) with each teacher: `self` (the base with the adapter
off), `ema` (the adapter's moving average swapped in) and a release teacher (a second, frozen model): the step
time, the teacher pass's share of it, and peak RSS, next to the plain `sft` step.
Then the `sft` step at each thread count in `--thread-counts` × compute dtype (`float32`, the path before
bfloat16, and `auto`), each job warm-forked, with its ratio to float32 at the same thread count and its peak RSS;
the load average is printed with it, since this machine's two cores may be shared.
Last, the precision cost at step 0 on real rollouts (8 sampled completions of the base model, temperature 1):
the per-token log-probs of the bfloat16 training forward against fp32's on the same tokens (the recorded
log-probs' stand-in), as mean and max |Δ| and the spread of the importance ratio exp(Δ).
Run: `python benchmarks/training_step.py [--steps 3] [--thread-counts 1,2] [--rounds 2] [--no-teachers] [--no-spread]`.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reef.core.settings import TrainingSettings
from reef.inference.local.model_files import resolve_model_path
from reef.learning.backends import LocalProcessBackend
from reef.learning.backends.local import default_threads
from reef.learning.base import TrainingJob

SPREAD_QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain recursion in one sentence.",
    "List three prime numbers.",
    "What does HTTP stand for?",
    "Give me a synonym for happy.",
    "How many legs has a spider?",
    "Translate 'good morning' to Spanish.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--model-cache", default="~/.cache/reef/models")
    parser.add_argument("--no-teachers", action="store_true", help="skip the distillation steps")
    parser.add_argument("--thread-counts", default="1,2", help="thread counts of the precision table ('': skip it)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the precision table")
    parser.add_argument("--no-spread", action="store_true", help="skip the bfloat16 log-prob spread on rollouts")
    args = parser.parse_args()

    base = resolve_model_path("smollm2", Path(args.model_cache))
    rng = random.Random(0)
    samples = [
        {
            "prompt_ids": [rng.randrange(100, 40000) for _ in range(64)],
            "completion_ids": [rng.randrange(100, 40000) for _ in range(64)],
        }
        for _ in range(8)
    ]
    config = TrainingSettings(
        lora_rank=args.rank, lora_alpha=2 * args.rank, micro_batch_size=8, max_seq_len=128, epochs=args.steps
    ).model_dump(mode="json")

    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import reef.training.job"], check=True)
    import_s = time.perf_counter() - started

    backend = LocalProcessBackend(threads=args.threads)

    def one_job(
        scratch: str, name: str, loss: str = "sft", extra: dict | None = None, runner: LocalProcessBackend = backend
    ) -> tuple[list[float], float, float, dict]:
        """(gaps between progress events, process start before the job function ran, job wall, metrics)."""
        arrivals: list[tuple[float, float]] = []
        job = TrainingJob(base, None, samples, loss, {**config, **(extra or {})}, Path(scratch) / name)
        started = time.perf_counter()
        result = runner.run(job, lambda event: arrivals.append((time.perf_counter(), event["elapsed_s"])))
        gaps = [b - a for a, b in zip([started, *(t for t, _ in arrivals)], (t for t, _ in arrivals), strict=False)]
        # The job reports seconds since it began (model load included): the rest of the first gap is the process.
        process_start = arrivals[0][0] - started - arrivals[0][1]
        return gaps, process_start, time.perf_counter() - started, result.metrics

    with tempfile.TemporaryDirectory() as scratch:
        cold, cold_start_s, cold_total_s, metrics = one_job(scratch, "cold")  # starts the fork server (imports)
        warm, warm_start_s, warm_total_s, _ = one_job(scratch, "warm")  # forked warm, as every later step is
        teachers = [] if args.no_teachers else teacher_rows(scratch, one_job, warm_start_s)
        thread_counts = [int(count) for count in args.thread_counts.split(",") if count]
        precision = precision_rows(scratch, one_job, thread_counts, args.rounds)
    # The first gap holds the start overhead and the first step; take the later steps as the step time.
    step_s = statistics.median(cold[1:] + warm[1:]) if len(cold) > 1 else cold[0]
    rows = [
        ("threads / compute dtype", f"{args.threads} / {metrics['compute_dtype']}"),
        ("LoRA rank / targets", f"{args.rank} / {len(config['target_modules'])} projections"),
        ("python start + import of the job module (torch)", f"{import_s:.2f} s"),
        ("process start, first job (fork server start: imports)", f"{cold_start_s:.2f} s"),
        ("process start, later jobs (fork from the warm server)", f"{warm_start_s:.2f} s"),
        (
            "first step incl. model load (first / later job)",
            f"{cold[0] - cold_start_s:.2f} s / {warm[0] - warm_start_s:.2f} s",
        ),
        ("optimizer step, 8 x 128 tokens (median)", f"{step_s:.2f} s"),
        (
            "steps (first job / later job)",
            " ".join(f"{s:.2f}" for s in cold) + " / " + " ".join(f"{s:.2f}" for s in warm),
        ),
        ("job wall incl. save (first / later)", f"{cold_total_s:.2f} s / {warm_total_s:.2f} s"),
        ("training process peak RSS", f"{metrics['peak_rss_mib'] / 1024:.2f} GiB"),
        *teachers,
        *precision,
        *([] if args.no_spread else spread_rows(base, args.threads)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def precision_rows(scratch: str, one_job: Any, thread_counts: list[int], rounds: int) -> list[tuple[str, str]]:
    """Warm `sft` jobs per thread count × compute dtype, the dtypes alternating for `rounds` rounds (so a neighbour's
    load falls on both): (row name, median / fastest step, median's ratio to float32's, peak RSS)."""
    rows = [("load average (1 min) before the precision table", f"{os.getloadavg()[0]:.2f}")]
    for threads in thread_counts:
        runner = LocalProcessBackend(threads=threads)
        steps: dict[str, list[float]] = {"float32": [], "auto": []}
        peak_mib: dict[str, float] = {}
        resolved: dict[str, str] = {}
        for round_index in range(rounds):
            for dtype in steps:
                gaps, _, _, metrics = one_job(
                    scratch, f"precision-{threads}-{dtype}-{round_index}", extra={"compute_dtype": dtype}, runner=runner
                )
                steps[dtype] += gaps[1:]  # the first gap holds the model load
                peak_mib[dtype] = max(peak_mib.get(dtype, 0.0), metrics["peak_rss_mib"])
                resolved[dtype] = metrics["compute_dtype"]
        baseline_s = statistics.median(steps["float32"])
        for dtype, times in steps.items():
            rows.append(
                (
                    f"sft step, {threads} thread(s), {resolved[dtype]}: median / fastest / vs float32 / peak RSS",
                    f"{statistics.median(times):.2f} s / {min(times):.2f} s / "
                    f"{statistics.median(times) / baseline_s:.2f}x / {peak_mib[dtype] / 1024:.2f} GiB",
                )
            )
    rows.append(("load average (1 min) after", f"{os.getloadavg()[0]:.2f}"))
    return rows


def spread_rows(base: Path, threads: int) -> list[tuple[str, str]]:
    """Per-token log-prob differences, bfloat16 training forward − fp32, on 8 sampled rollouts of the base model."""
    import torch
    from transformers import AutoTokenizer

    from reef.training.chunked_logprobs import completion_logprobs
    from reef.training.job import load_trainable_model
    from reef.training.precision import compute_context, keep_adapter_deltas_fp32
    from reef.training.samples import collate, render_prompt

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base)
    job = TrainingJob(base, None, [], "rl", TrainingSettings().model_dump(mode="json"), Path("unused"))
    model, _, _ = load_trainable_model(job)  # a fresh adapter: the step-0 policy is the base that sampled
    keep_adapter_deltas_fp32(model)  # a no-op at fp32; the bfloat16 path as the job runs it
    samples = []
    with torch.no_grad():
        for question in SPREAD_QUESTIONS:
            prompt = render_prompt(tokenizer, [{"role": "user", "content": question}])
            output = model.generate(torch.tensor([prompt]), max_new_tokens=64, do_sample=True, temperature=1.0)
            samples.append({"prompt_ids": prompt, "completion_ids": output[0][len(prompt) :].tolist()})
        batch = collate(samples, tokenizer.pad_token_id)
        recorded = completion_logprobs(model, batch, torch.float32)
        with compute_context(torch.bfloat16, "cpu"):
            trained = completion_logprobs(model, batch, torch.bfloat16)
    delta = (trained - recorded)[batch["mask"].bool()]
    ratio = delta.exp()
    outside = ((ratio < 0.8) | (ratio > 1.28)).float().mean()
    return [
        (
            f"bfloat16 - fp32 log-probs, {delta.numel()} rollout tokens: mean |d| / max |d| / mean d",
            f"{delta.abs().mean():.4f} / {delta.abs().max():.4f} / {delta.mean():+.4f}",
        ),
        (
            "importance ratio exp(d): std / min / max / outside [0.8, 1.28]",
            f"{ratio.std():.4f} / {ratio.min():.3f} / {ratio.max():.3f} / {outside:.1%}",
        ),
    ]


def teacher_rows(scratch: str, one_job: Any, start_s: float) -> list[tuple[str, str]]:
    """One warm `sdft` job per teacher kind: (row name, step time / teacher pass per step / peak RSS)."""
    teacher_dir = Path(scratch) / "warm"  # the plain job's adapter stands in for another release
    rows = []
    for kind, extra in (
        ("self", {"teacher": "self"}),
        ("ema", {"teacher": "ema"}),
        ("release", {"teacher": "release", "teacher_path": str(teacher_dir)}),
    ):
        gaps, _, _, metrics = one_job(scratch, f"teacher-{kind}", "sdft", {**extra, "importance_cap": 0})
        step_s = statistics.median(gaps[1:]) if len(gaps) > 1 else gaps[0] - start_s
        teacher_s = metrics["teacher_s"] / max(metrics["steps"], 1)
        rows.append(
            (
                f"sdft step, teacher {kind}: step / teacher pass / peak RSS",
                f"{step_s:.2f} s / {teacher_s:.2f} s / {metrics['peak_rss_mib'] / 1024:.2f} GiB",
            )
        )
    return rows


if __name__ == "__main__":
    main()
