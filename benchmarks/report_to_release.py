"""From the last report of a batch to the new release serving, on the real model (SmolLM2, LoRA SFT, local backend).

Starts `reef serve` on the embedded defaults (sft recipe, batch 8, gate policy `always` so every step publishes),
then per batch: 8 chat requests through the API, 8 reports carrying demonstrations, and polls `/reef/status`
every 0.1 s until the step's release serves. Prints per batch the training job's wall time (from the commit) and
the time from the last report's acknowledgement to the new release serving.

    python benchmarks/report_to_release.py [--batches 3]
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

from reef.demo.api import ReefAPI
from reef.demo.server import ReefServer, free_port, serve_command
from reef.demo.tasks import generate

BATCH = 8


async def batches(url: str, count: int) -> list[tuple[float, float, float]]:
    api = ReefAPI(url, "bench-release")
    tasks = generate("train", BATCH * count, seed=1)
    rows = []
    try:
        for number in range(count):
            step = await api.last_step()
            answers = await api.answer_all(tasks[number * BATCH : (number + 1) * BATCH], 0.0, 8)
            for answer in answers:
                await api.report(0.0, answer.receipt, {"demonstration": answer.task.answer})
            last_report = time.monotonic()
            outcome = await api.wait_for_step(step, 600.0, poll_s=0.1)
            serving_s = time.monotonic() - last_report
            commit = outcome.commit or {}
            metrics = commit.get("metrics") or {}
            rows.append((float(metrics.get("wall_s") or 0.0), serving_s, float(commit.get("step") or 0)))
            print(f"batch {number + 1}: {commit.get('verdict')}, report → serving {serving_s:.2f} s", flush=True)
    finally:
        await api.aclose()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="reef-bench-release-"))
    tasks_path = state / "validation.jsonl"
    rows_json = [t.to_evaluation_row() for t in generate("validation", 4)]
    tasks_path.write_text("".join(json.dumps(r) + "\n" for r in rows_json), encoding="utf-8")
    port = free_port()
    flags = ["--evaluation.policy", "always", "--evaluation.max-new-tokens", "8", "--training.learning-rate", "6e-4"]
    command = serve_command("sft", port, state, tasks_path, BATCH, flags)
    with ReefServer(command, f"http://127.0.0.1:{port}", state / "serve.log") as server:
        server.wait_healthy(600.0)
        rows = asyncio.run(batches(server.url, args.batches))
    print("\n| batch | training job wall s | last report → release serving s |")
    print("|---|---|---|")
    for number, (train_s, serving_s, _) in enumerate(rows, 1):
        print(f"| {number} | {train_s:.2f} | {serving_s:.2f} |")
    if rows:
        print(f"| median | {statistics.median(r[0] for r in rows):.2f} | {statistics.median(r[1] for r in rows):.2f} |")
    print("(the rest of report → serving: the learner noticing the batch, the paired gate on 4 tasks, the git")
    print(" publish, loading the adapter into the engine; the first batch also starts the training fork server)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
