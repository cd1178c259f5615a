"""`python -m reef.learning.training.worker JOBDIR`: run `JOBDIR/job.json` and stream JSON lines on stdout.

Each line is `{"event": "progress", "step", "loss", …}` or, last, `{"event": "result", "adapter_path", "metrics"}`.
Everything else a library prints goes to stderr (the backend's log file), so stdout carries only these lines.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO

import orjson


def main(argv: list[str]) -> int:
    job_dir = Path(argv[0])
    # Claim the real stdout for the protocol, then point fd 1 at stderr so stray prints (even from C) stay out.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import torch

    threads = int(os.environ.get("REEF_TRAINING_THREADS", "0"))
    if threads > 0:
        torch.set_num_threads(threads)

    from reef.learning.training.job import run_training_job
    from reef.learning.training.jobfile import job_from_json, result_to_json

    job = job_from_json(orjson.loads((job_dir / "job.json").read_bytes()))
    result = run_training_job(job, progress=lambda event: _emit(protocol, {"event": "progress", **event}))
    _emit(protocol, {"event": "result", **result_to_json(result)})
    return 0


def _emit(stream: TextIO, event: dict[str, Any]) -> None:
    stream.write(orjson.dumps(event).decode() + "\n")
    stream.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
