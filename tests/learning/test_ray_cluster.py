"""The `ray` training backend on a real two-node Ray cluster on 127.0.0.1, started and stopped here.

The head node declares 1 CPU and nothing else; the second node declares 1 CPU and the custom resource
`reef_trainer`, which the backend requests, so every training task must land on the second node. Tests:
- a real SmolLM2 training job is placed by that request (the result names the node that ran it);
- a learner whose training node is killed (SIGKILL of its raylet) mid-job commits a `skipped` step that consumes
  nothing, and once a node with the resource is back, its next step trains the same batch and publishes.
Each node is a `ray start --block` process of ours; nothing here runs `ray stop`, which would stop every Ray
cluster of the user on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from reef.learning.backends import RayBackend
from tests.fakes.learning_recipe import DemoRecipe
from tests.fakes.learning_world import QUESTIONS, consumed_steps, make_settings, open_world, started
from tests.fakes.reef_process import free_port
from tests.learning.test_training_backends import job


@pytest.fixture(scope="module")
def base_model_path() -> Path:
    from reef.inference.local.model_files import resolve_model_path

    return resolve_model_path("smollm2", Path(os.environ.get("REEF_MODEL_CACHE", "~/.cache/reef/models")))


ray = pytest.importorskip("ray")
RAY = Path(sys.executable).parent / "ray"
REPO = Path(__file__).resolve().parents[2]
RESOURCE = "reef_trainer"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not RAY.exists(), reason="the `ray` command is not installed")]


class Cluster:
    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = f"/tmp/reef-ray-{uuid.uuid4().hex[:8]}"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
            "RAY_USAGE_STATS_ENABLED": "0",
            # A killed node is declared dead after ~2 s of failed health checks rather than the default ~30 s.
            "RAY_health_check_period_ms": "500",
            "RAY_health_check_timeout_ms": "500",
            "RAY_health_check_failure_threshold": "3",
        }
        common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
        self.head = subprocess.Popen(
            [str(RAY), "start", "--head", f"--port={self.port}", "--include-dashboard=false",
             f"--temp-dir={self.temp_dir}", *common],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_for_port(self.port, self.head)
        self.worker: subprocess.Popen[bytes] | None = None

    def start_worker(self, job_seconds: float = 0) -> None:
        self.worker = subprocess.Popen(
            [str(RAY), "start", f"--address={self.address}", f"--resources={{\"{RESOURCE}\": 1}}",
             "--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"],
            env={**self.env, "REEF_FAKE_JOB_S": str(job_seconds)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.trainer_node() is not None:
                return
            time.sleep(0.5)
        raise TimeoutError("the second Ray node did not join")

    def trainer_node(self) -> str | None:
        for node in ray.nodes():
            if node["Alive"] and node["Resources"].get(RESOURCE):
                return node["NodeID"]  # type: ignore[no-any-return]
        return None

    def kill_worker(self) -> None:
        """SIGKILL the second node's raylet (the node dies as in a crash), then reap its `ray start`."""
        assert self.worker is not None
        for process in psutil.Process(self.worker.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "raylet" in " ".join(process.cmdline()):
                    process.send_signal(signal.SIGKILL)
        self.worker.send_signal(signal.SIGTERM)
        self.worker.wait(timeout=60)

    def stop(self) -> None:
        for process in (self.worker, self.head):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, "ray start --head exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError("the Ray head did not come up")


def _running_task(name: str) -> bool:
    commands = (" ".join(process.info["cmdline"] or []) for process in psutil.process_iter(["cmdline"]))
    return any(command.startswith(f"ray::{name}") for command in commands)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Token auth off on both sides: with RAY_AUTH_MODE unset, a driver that finds ~/.ray/auth_token (left by any
    # earlier local `ray.init()` on this machine) turns token auth on and is refused by a head started without it.
    mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    started_cluster = Cluster()
    try:
        ray.init(address=started_cluster.address, log_to_driver=False)
        yield started_cluster
    finally:
        ray.shutdown()
        started_cluster.stop()
        if mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = mode


@pytest.mark.model
def test_a_real_training_job_is_placed_on_the_node_with_the_requested_resource(
    cluster: Cluster, base_model_path: Path, tmp_path: Path
) -> None:
    cluster.start_worker()
    trainer = cluster.trainer_node()
    backend = RayBackend(address=cluster.address, resources={RESOURCE: 1})
    events: list[dict[str, Any]] = []
    result = backend.run(job(base_model_path, tmp_path / "out"), events.append)
    assert result.metrics["backend"] == "ray" and result.metrics["ray_node_id"] == trainer
    assert result.metrics["ray_node_id"] != ray.get_runtime_context().get_node_id()  # not the head (the driver's)
    assert [e["step"] for e in events] == [1] and (tmp_path / "out" / "adapter_config.json").exists()
    cluster.kill_worker()


async def test_a_node_dying_mid_job_fails_the_step_and_the_batch_is_retried(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start_worker(job_seconds=120)  # long enough to be killed mid-job
    backend = RayBackend(
        address=cluster.address, resources={RESOURCE: 1}, job_function="tests.fakes.training_backend:timed_fake_job"
    )
    world = await started(open_world(tmp_path, make_settings(tmp_path, policy="always"), DemoRecipe, backend))
    reports = [world.report("math", q, QUESTIONS[q]) for q in list(QUESTIONS)[:2]]

    step = asyncio.create_task(world.runtime.step("math"))
    deadline = time.monotonic() + 90
    while not _running_task("run_remote"):
        assert time.monotonic() < deadline and not step.done(), "the training task never started on the node"
        await asyncio.sleep(0.2)
    await asyncio.to_thread(cluster.kill_worker)
    failed = await asyncio.wait_for(step, timeout=120)
    assert failed is not None and failed["verdict"] == "skipped" and "batch will be retried" in failed["reason"]
    assert "Ray training task failed" in failed["reason"]
    assert set(consumed_steps(world).values()) == {None}

    cluster.start_worker(job_seconds=0)  # a node with the resource is back
    retried = await asyncio.wait_for(world.runtime.step("math"), timeout=120)
    assert retried is not None and retried["verdict"] == "published"
    assert sorted(retried["consumed_record_ids"]) == sorted(r.agent_record_id for r in reports)
    assert retried["metrics"].get("ray_node_id") == cluster.trainer_node()
    await world.runtime.stop()
