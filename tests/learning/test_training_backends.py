"""Both training launchers run the same job outside the calling process and hand back a loadable adapter."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from reef.core.settings import TrainingSettings
from reef.learning.backends import (
    LocalProcessBackend,
    RayBackend,
    TrainingFailed,
    open_training_backend,
)
from reef.learning.base import TrainingJob
from reef.recipes.sft import SFTConfig

pytestmark = pytest.mark.model

SAMPLES = [
    {"messages": [{"role": "user", "content": "Say yes."}], "completion_text": "yes"},
    {"messages": [{"role": "user", "content": "Say no."}], "completion_text": "no"},
]


@pytest.fixture(scope="module")
def base_model_path() -> Path:
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path("smollm2", Path(os.environ.get("REEF_MODEL_CACHE", "~/.cache/reef/models")))


def job(base_model_path: Path, output_dir: Path) -> TrainingJob:
    settings = TrainingSettings(lora_rank=4, max_seq_len=32, micro_batch_size=2, target_modules=["q_proj", "v_proj"])
    return TrainingJob(base_model_path, None, SAMPLES, "sft", settings, SFTConfig(), output_dir)


def assert_loadable_adapter(base_model_path: Path, adapter_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model_path), adapter_path)
    assert model.peft_config["default"].r == 4


def test_the_training_backend_follows_the_settings():
    assert isinstance(open_training_backend(TrainingSettings()), LocalProcessBackend)
    backend = open_training_backend(TrainingSettings(backend="ray", ray_address="ray://10.0.0.1:10001"))
    assert isinstance(backend, RayBackend) and backend.address == "ray://10.0.0.1:10001"


def test_the_local_backend_trains_in_a_child_process_and_streams_progress(base_model_path, tmp_path):
    backend = LocalProcessBackend(work_dir=tmp_path / "jobs")
    for attempt in ("first", "second"):  # the second job is forked from the same warm server
        events: list[dict] = []
        result = backend.run(job(base_model_path, tmp_path / attempt), events.append)
        assert [e["step"] for e in events] == [1] and events[0]["loss"] > 0
        assert result.adapter_path == tmp_path / attempt and result.metrics["samples"] == 2
        assert result.metrics["pid"] != os.getpid()
        assert list((tmp_path / "jobs").iterdir()) == []  # a finished job leaves no job directory behind
        assert_loadable_adapter(base_model_path, result.adapter_path)


def test_a_failing_local_job_raises_with_the_tail_of_its_log(tmp_path):
    broken = job(tmp_path / "no-such-model", tmp_path / "out")
    with pytest.raises(TrainingFailed) as error:
        LocalProcessBackend(work_dir=tmp_path / "jobs").run(broken)
    assert "no-such-model" in error.value.message


def test_the_ray_backend_runs_the_same_job_as_a_ray_task(base_model_path, tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        events: list[dict] = []
        result = RayBackend(address=None).run(job(base_model_path, tmp_path / "out"), events.append)
    finally:
        ray.shutdown()
    assert result.metrics["backend"] == "ray" and [e["step"] for e in events] == [1]
    assert_loadable_adapter(base_model_path, result.adapter_path)


FAULTS_OF_REUSE = """
import resource, sys
import torch
from reef.learning.backends.local import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def step():  # a step's activations: ten 4 MB blocks alive at once, then all freed
    blocks = [torch.ones(1 << 20) for _ in range(10)]
    return sum(float(block.sum()) for block in blocks)
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_job_process_reuses_the_memory_a_step_freed_instead_of_faulting_it_in_again():
    def faults(mode: str) -> int:
        run = subprocess.run([sys.executable, "-c", FAULTS_OF_REUSE, mode], capture_output=True, text=True, check=True)
        return int(run.stdout.split()[-1])

    default, kept = faults("default"), faults("keep")
    # glibc hands freed blocks back and faults them in again: 40 MB (~10,000 pages) each step, or, once its dynamic
    # mmap threshold has risen past the blocks, at least one step's worth over the five (seen: 51,000 or 11,243).
    assert default > 10_000
    assert kept < default / 8  # kept: at most a few hundred pages a step (seen: 0 or 1,024)
