"""Training-step cost of the local backend: LoRA on SmolLM2, a batch of 8 × 128 tokens.

Runs two jobs through the backend and prints: job start overhead for the first job (which starts the fork
server) and for a later one (forked warm), time per optimizer step, and the training process's peak RSS.
Then the distillation step (`sdft`'s forward KL, same samples) with each teacher: `self` (the base with the adapter
off), `ema` (the adapter's moving average swapped in) and a release teacher (a second, frozen model): the step
time, the teacher pass's share of it, and peak RSS, next to the plain `sft` step.
Then the `sft` step at each thread count in `--thread-counts` × compute dtype (`float32`, the path before
bfloat16, and `auto`), each job warm-forked, with its ratio to float32 at the same thread count and its peak RSS;
the load average is printed with it, since this machine's two cores may be shared.
Run: `python benchmarks/training_step.py [--steps 3] [--thread-counts 1,2] [--no-teachers]`.
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
from reef.learning.base import TrainingJob
from reef.learning.training import LocalProcessBackend
from reef.learning.training.local_backend import default_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--model-cache", default="~/.cache/reef/models")
    parser.add_argument("--no-teachers", action="store_true", help="skip the distillation steps")
    parser.add_argument("--thread-counts", default="1,2", help="thread counts of the precision table ('': skip it)")
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
    subprocess.run([sys.executable, "-c", "import reef.learning.training.job"], check=True)
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
        precision = precision_rows(scratch, one_job, thread_counts)
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
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def precision_rows(scratch: str, one_job: Any, thread_counts: list[int]) -> list[tuple[str, str]]:
    """One warm `sft` job per thread count × compute dtype: (row name, median step / ratio to float32 / peak RSS)."""
    rows = [("load average (1 min) before the precision table", f"{os.getloadavg()[0]:.2f}")]
    for threads in thread_counts:
        runner = LocalProcessBackend(threads=threads)
        baseline_s = None
        for dtype in ("float32", "auto"):
            gaps, _, _, metrics = one_job(
                scratch, f"precision-{threads}-{dtype}", extra={"compute_dtype": dtype}, runner=runner
            )
            step_s = statistics.median(gaps[1:]) if len(gaps) > 1 else gaps[0]
            baseline_s = baseline_s or step_s
            rows.append(
                (
                    f"sft step, {threads} thread(s), {metrics['compute_dtype']}: step / vs float32 / peak RSS",
                    f"{step_s:.2f} s / {step_s / baseline_s:.2f}x / {metrics['peak_rss_mib'] / 1024:.2f} GiB",
                )
            )
    rows.append(("load average (1 min) after", f"{os.getloadavg()[0]:.2f}"))
    return rows


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
