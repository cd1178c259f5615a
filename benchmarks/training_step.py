"""Training-step cost of the local backend: LoRA on SmolLM2, a batch of 8 × 128 tokens.

Prints a table: subprocess start overhead (spawn + imports + model load, before the first step), time per
optimizer step, and the training process's peak RSS. Run: `python benchmarks/training_step.py [--steps 3]`.
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

    arrivals: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        job = TrainingJob(base, None, samples, "sft", config, Path(scratch) / "adapter")
        started = time.perf_counter()
        result = LocalProcessBackend(threads=args.threads).run(job, lambda event: arrivals.append(time.perf_counter()))
        total_s = time.perf_counter() - started
    steps = [b - a for a, b in zip([started, *arrivals], arrivals, strict=False)]
    # The first gap holds the start overhead and the first step; take the later steps as the step time.
    step_s = statistics.median(steps[1:]) if len(steps) > 1 else steps[0]
    rows = [
        ("threads", f"{args.threads}"),
        ("LoRA rank / targets", f"{args.rank} / {len(config['target_modules'])} projections"),
        ("python start + import of the job module (torch)", f"{import_s:.2f} s"),
        ("start overhead (spawn, imports, model load)", f"{steps[0] - step_s:.2f} s"),
        ("optimizer step, 8 x 128 tokens (median)", f"{step_s:.2f} s"),
        ("steps", " ".join(f"{s:.2f}" for s in steps)),
        ("job wall (incl. save)", f"{total_s:.2f} s"),
        ("training process peak RSS", f"{result.metrics['peak_rss_mib'] / 1024:.2f} GiB"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
