"""The `local` training backend: the job runs in a child Python process, so the server keeps serving."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

import reef
from reef.learning.base import TrainingBackend, TrainingJob, TrainingResult
from reef.learning.training.jobfile import TrainingFailed, job_to_json, result_from_json

LOG_TAIL_BYTES = 4000


def default_threads() -> int:
    """All cores but one, so the serving process keeps a core to itself."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, cores - 1)


class LocalProcessBackend(TrainingBackend):
    """Runs `python -m reef.learning.training.worker JOBDIR`; forwards its progress lines; raises on failure.

    `work_dir` holds the job directories (job.json, worker.log); a failed job's directory is kept for inspection.
    """

    def __init__(self, threads: int | None = None, work_dir: Path | None = None, python: str = sys.executable):
        self.threads = threads or default_threads()
        self.work_dir = work_dir
        self.python = python

    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        job_dir = Path(tempfile.mkdtemp(prefix="reef-training-", dir=self.work_dir))
        (job_dir / "job.json").write_bytes(orjson.dumps(job_to_json(job)))
        log_path = job_dir / "worker.log"
        result: dict[str, Any] | None = None
        with open(log_path, "wb") as log:
            child = subprocess.Popen(
                [self.python, "-m", "reef.learning.training.worker", str(job_dir)],
                stdout=subprocess.PIPE,
                stderr=log,
                env=self._environment(),
            )
            try:
                assert child.stdout is not None
                for line in child.stdout:
                    try:
                        event = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if event.pop("event", None) == "result":
                        result = event
                    elif progress is not None:
                        progress(event)
                returncode = child.wait()
            except BaseException:
                child.kill()
                child.wait()
                raise
        if returncode != 0 or result is None:
            tail = log_path.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
            raise TrainingFailed(f"training job exited with status {returncode} (log: {log_path}):\n{tail}")
        shutil.rmtree(job_dir, ignore_errors=True)
        return result_from_json(result)

    def _environment(self) -> dict[str, str]:
        threads = str(self.threads)
        package_root = str(Path(reef.__file__).resolve().parent.parent)
        python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        return {
            **os.environ,
            "PYTHONPATH": python_path,
            "REEF_TRAINING_THREADS": threads,
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "TOKENIZERS_PARALLELISM": "false",
        }
