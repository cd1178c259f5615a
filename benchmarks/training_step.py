"""Training-step cost of the local backend: LoRA on SmolLM2, a batch of 8 × 128 tokens.

Runs two jobs through the backend and prints: job start overhead for the first job (which starts the fork
server) and for a later one (forked warm), time per optimizer step, and the training process's peak RSS.
Then the distillation step (`sdft`'s forward KL, same samples) with each teacher: `self` (the base with the adapter
off), `ema` (the adapter's moving average swapped in) and a release teacher (a second, frozen model): the step
time, the teacher pass's share of it, and peak RSS, next to the plain `sft` step.
Run: `python benchmarks/training_step.py [--steps 3] [--no-teachers]`.
"""

from __future__ import annotations

import argparse
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
        scratch: str, name: str, loss: str = "sft", extra: dict | None = None
    ) -> tuple[list[float], float, float, dict]:
        """(gaps between progress events, process start before the job function ran, job wall, metrics)."""
        arrivals: list[tuple[float, float]] = []
        job = TrainingJob(base, None, samples, loss, {**config, **(extra or {})}, Path(scratch) / name)
        started = time.perf_counter()
        result = backend.run(job, lambda event: arrivals.append((time.perf_counter(), event["elapsed_s"])))
        gaps = [b - a for a, b in zip([started, *(t for t, _ in arrivals)], (t for t, _ in arrivals), strict=False)]
        # The job reports seconds since it began (model load included): the rest of the first gap is the process.
        process_start = arrivals[0][0] - started - arrivals[0][1]
        return gaps, process_start, time.perf_counter() - started, result.metrics

    with tempfile.TemporaryDirectory() as scratch:
        cold, cold_start_s, cold_total_s, metrics = one_job(scratch, "cold")  # starts the fork server (imports)
        warm, warm_start_s, warm_total_s, _ = one_job(scratch, "warm")  # forked warm, as every later step is
        teachers = [] if args.no_teachers else teacher_rows(scratch, one_job, warm_start_s)
    # The first gap holds the start overhead and the first step; take the later steps as the step time.
    step_s = statistics.median(cold[1:] + warm[1:]) if len(cold) > 1 else cold[0]
    rows = [
        ("threads", f"{args.threads}"),
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
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


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
