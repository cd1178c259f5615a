"""Run `reef serve` as a real subprocess for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReefProcess:
    """`python -m reef.cli.main serve …` on a free port, with its state under `state_dir`."""

    # Cleared by tests/conftest.py for a test not marked `e2e`: starting a server is what makes a test end to end.
    allowed_here: ClassVar[bool] = True

    def __init__(
        self,
        state_dir: Path,
        *flags: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        python: str | None = None,
    ):
        self.state_dir = state_dir
        self.python = python or sys.executable  # another environment's interpreter runs the `reef` installed there
        self.cwd = cwd  # where `python -m reef.cli.main` runs: a checkout there is the `reef` it imports
        self.flags = list(flags)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **(env or {})}
        self.log_path = state_dir / f"serve-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0) -> ReefProcess:
        if not ReefProcess.allowed_here:
            raise RuntimeError("a test that starts `reef serve` must be marked `@pytest.mark.e2e`")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        command = [
            self.python,
            "-m",
            "reef.cli.main",
            "serve",
            "--reef.port",
            str(self.port),
            "--storage.dir",
            str(self.state_dir),
            "--reef.log-level",
            "warning",
            *self.flags,
        ]
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"reef serve exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"reef serve did not become healthy:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no cleanup, as in a crash."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.log.close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self) -> ReefProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_commits(
    client: httpx.Client, scenario: str, count: int, timeout_s: float, poll_s: float = 0.1
) -> list[dict[str, Any]]:
    """The scenario's commits once there are at least `count` (AssertionError after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        commits: list[dict[str, Any]] = client.get(f"/reef/scenarios/{scenario}/commits").json()["commits"]
        if len(commits) >= count:
            return commits
        time.sleep(poll_s)
    raise AssertionError(f"fewer than {count} learner steps in {timeout_s} s: {client.get('/reef/status').json()}")


def wait_considered(client: httpx.Client, scenario: str, sequence: int, timeout_s: float = 60.0) -> None:
    """Wait until the server's learner of `scenario` has decided on every record through `sequence` (its status's
    `records_considered`): whatever those records would start has started, and committed, by then."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.get("/reef/status").json()["scenarios"].get(scenario, {})
        if status.get("records_considered", 0) >= sequence:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the learner of {scenario!r} never considered record {sequence}: {status}")
        time.sleep(0.05)
