"""`reef serve --reef.workers N`: N serving processes on one port, one record writer, one learner per scenario.

The `reef serve` you start becomes a supervisor. It opens the record store (which starts the store's one writer
process), holds the port, and starts N workers: each is `reef serve` again with the same settings, listening on
its own socket bound to the same address with SO_REUSEPORT (the kernel spreads new connections across them), and
sending every write over a channel of its own to the supervisor's writer, so appends from all workers are grouped
into the same fsync'd transactions as in one process. Learners are elected as among replicas (a file lock per
scenario under `<storage.dir>/leaders`), so each scenario has one learner, in one of the workers.

A worker that dies is started again; if the writer dies, the workers are restarted on a new one (until then their
writes answer 503). Ctrl-C (SIGINT) or SIGTERM: every worker drains (uvicorn's graceful shutdown)
and exits, then the writer commits what it was sent and stops.
Workers are told they are workers by the environment variable `REEF_WORKER_WRITER_FD` (the channel's descriptor).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from reef.core.settings import Settings

log = logging.getLogger(__name__)

WRITER_FD_ENV = "REEF_WORKER_WRITER_FD"
RESTART_DELAY_S = 1.0
DRAIN_TIMEOUT_S = 30.0

_taken: list[int | None] = []


def shared_writer_fd() -> int | None:
    """In a worker: the descriptor of its channel to the supervisor's record writer (read once, then removed from
    the environment so the worker's own children do not inherit the claim); None outside a worker."""
    if not _taken:
        value = os.environ.pop(WRITER_FD_ENV, None)
        _taken.append(int(value) if value else None)
    return _taken[0]


def is_worker() -> bool:
    return shared_writer_fd() is not None


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` with SO_REUSEPORT (and SO_REUSEADDR), not yet listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class Supervisor:
    """Starts, restarts and drains the workers of one `reef serve`."""

    def __init__(self, settings: Settings, argv: list[str]) -> None:
        self.settings = settings
        self.argv = argv
        self.stopping = False
        self.workers: dict[int, subprocess.Popen[bytes]] = {}  # worker index -> process

    def run(self) -> int:
        from reef.core.private_files import private_directory
        from reef.storage.sql import open_record_store

        storage = self.settings.storage
        private_directory(storage.dir)
        url = storage.record_database_url
        records = open_record_store(storage.record_backend, directory=storage.dir, database_url=url)
        # Held (bound, never listening) so the port stays ours between worker restarts; resolves port 0 once.
        holder = reuseport_socket(self.settings.reef.host, self.settings.reef.port)
        self.port = holder.getsockname()[1]
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        log.info("reef: %d workers on http://%s:%d", self.settings.reef.workers, self.settings.reef.host, self.port)
        try:
            for index in range(self.settings.reef.workers):
                self.workers[index] = self._spawn(records, index)
            while not self.stopping:
                if not records.writer_alive():
                    # The next spawn starts a new writer; the workers still on the dead one go and come back.
                    log.warning("the record writer died; restarting the workers on a new one")
                    self._stop_workers()
                for index, process in list(self.workers.items()):
                    if process.poll() is not None and not self.stopping:
                        log.warning("worker %d (pid %d) exited with %s; starting it again", index, process.pid,
                                    process.returncode)  # fmt: skip
                        time.sleep(RESTART_DELAY_S)
                        if not self.stopping:
                            self.workers[index] = self._spawn(records, index)
                time.sleep(0.2)
            return self._drain()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            holder.close()
            records.close()  # after every worker: the writer commits what they sent, then stops

    def _spawn(self, records: Any, index: int) -> subprocess.Popen[bytes]:
        channel = records.channel_for_process()
        try:
            fd = channel.fileno()
            command = [sys.executable, "-m", "reef.cli.main", "serve", *self.argv]
            command += ["--reef.workers", "1", "--reef.port", str(self.port)]
            if self.settings.reef.replica_id:  # each worker is a replica of its own: `<id>/<worker index>`
                command += ["--reef.replica-id", f"{self.settings.reef.replica_id}/{index}"]
            env = {**os.environ, WRITER_FD_ENV: str(fd)}
            return subprocess.Popen(command, env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL)
        finally:
            channel.close()

    def _stop(self, signum: int, _frame: Any) -> None:
        self.stopping = True
        self._stop_workers()

    def _stop_workers(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    def _drain(self) -> int:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        for process in self.workers.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not drain in time; killing it", process.pid)
                process.kill()
                process.wait()
        return 0
