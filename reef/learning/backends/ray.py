"""The `ray` training backend: the same job function, run as a Ray task on a cluster.

The base model path must exist on the worker nodes (a shared path or the same image); the parent adapter
travels with the task and the candidate adapter's files come back with the result, so nothing else is shared.

The task asks for `training.ray_num_cpus`, `training.ray_num_gpus` and the custom `training.ray_resources`
(`{"trainer": 1}` places it only on nodes started with `--resources '{"trainer": 1}'`). It is never retried by Ray:
a node that dies mid-job fails the step with `TrainingFailed`, and the learner retries the batch (see `learner`),
so the retry is judged and committed like any step. The result names the node that ran it (`ray_node_id`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from reef.learning.base import TrainingBackend, TrainingJob, TrainingResult
from reef.training.jobfile import TrainingFailed, job_from_json, job_to_json, result_to_json

JOB_FUNCTION = "reef.training.job:run_training_job"


class RayBackend(TrainingBackend):
    """Runs `run_training_job` as a Ray task (`ray.init(address=…)`); progress is replayed from the per-step losses.

    `job_function` names the function the task runs (`module:function`, taking a `TrainingJob` and returning a
    `TrainingResult`); it is the real job but for tests that need a job they can time."""

    def __init__(
        self,
        address: str | None = None,
        num_cpus: float = 1,
        num_gpus: float = 0,
        resources: dict[str, float] | None = None,
        job_function: str = JOB_FUNCTION,
    ):
        self.address = address
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.resources = dict(resources or {})
        self.job_function = job_function

    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        import ray

        ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
        task = ray.remote(num_cpus=self.num_cpus, num_gpus=self.num_gpus, resources=self.resources, max_retries=0)(
            run_remote
        )
        parent_files = read_tree(job.parent_adapter_path) if job.parent_adapter_path is not None else None
        threads = max(1, int(self.num_cpus))
        try:
            result, files = ray.get(task.remote(job_to_json(job), parent_files, threads, self.job_function))
        except ray.exceptions.RayError as exc:  # a node or worker died, or the job raised on the node
            raise TrainingFailed(f"the Ray training task failed: {type(exc).__name__}: {str(exc)[-2000:]}") from exc
        write_tree(job.output_dir, files)
        metrics = {**result["metrics"], "backend": "ray"}
        if progress is not None:
            for step, loss in enumerate(metrics["loss"], start=1):
                progress({"step": step, "loss": loss})
        return TrainingResult(adapter_path=job.output_dir, metrics=metrics)


def run_remote(
    job_json: dict[str, Any], parent_files: dict[str, bytes] | None, threads: int, job_function: str = JOB_FUNCTION
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """On the worker: rebuild the job in a scratch directory, run it, return (result, candidate files)."""
    import importlib

    import ray
    import torch

    module_name, _, function_name = job_function.partition(":")
    run_training_job = getattr(importlib.import_module(module_name), function_name)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="reef-ray-job-") as scratch:
        job_json = {**job_json, "output_dir": str(Path(scratch) / "candidate")}
        if parent_files is not None:
            write_tree(Path(scratch) / "parent", parent_files)
            job_json["parent_adapter_path"] = str(Path(scratch) / "parent")
        result = run_training_job(job_from_json(job_json))
        answer = result_to_json(result)
        answer["metrics"] = {**answer["metrics"], "ray_node_id": ray.get_runtime_context().get_node_id()}
        return answer, read_tree(result.adapter_path)


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    """Write `read_tree`'s output back under `root`."""
    for relative, data in files.items():
        path = Path(root) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
