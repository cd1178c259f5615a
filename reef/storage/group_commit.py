"""Group commit: one writer process owns the write connection and commits every queued append in one transaction.

Callers enqueue work and wait on a future; the writer (`reef.storage.writer_process`) takes whatever queued up
while it was busy, commits it all with a single fsync, and only then acknowledges. A future is never settled
before its commit, so a receipt handed to a client always names a durable record.

Each event loop that appends gets its own channel to the writer, read by that loop itself: an acknowledgement
never waits for another thread to get the interpreter lock. Blocking callers (`append`, `call`) share the control
channel, read by a small thread. If the writer process dies, its waiting callers get an error and the next call
starts a new one.

Several serving processes (`reef serve --reef.workers N`) share one writer: the process that started it hands each
of the others a channel of its own (`channel_for_process`), and they open `GroupCommitWriter(…, attach=sock)`,
which starts no writer but sends its jobs (and its event loops' channels) over that socket. A commit is grouped
and made durable the same way whichever process sent it. An attached writer cannot restart a writer that died:
its callers then get `WriterStopped` (503).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from reef.core.errors import Unavailable
from reef.storage.writer_process import (
    APPEND,
    CALL,
    STATS,
    STOP,
    CommitGroup,
    FrameReader,
    WriterStats,
    encode_config,
    frame,
)

log = logging.getLogger(__name__)

__all__ = ["GroupCommitWriter", "WriterStats", "WriterStopped"]

START_TIMEOUT_S = 60.0
# Imported, not run as __main__: what it pickles must name its real module.
_CHILD_MAIN = "import sys; from reef.storage.writer_process import main; sys.exit(main(sys.argv[1:]))"
STOP_TIMEOUT_S = 30.0


class WriterStopped(Unavailable):
    """The writer process went away before acknowledging a job (it may or may not be durable: retry it, by id)."""


class GroupCommitWriter:
    """The single writer of a database: groups appends, runs other writes alone, in submission order per caller.

    `open_engine` and `commit_group` must be picklable (module-level functions, or partials of them): the
    writer process calls `open_engine()` for its connection and `commit_group(conn, works, thorough)` per group.
    Works and `call` writes travel by pickle too.
    """

    def __init__(
        self,
        open_engine: Callable[[], sa.Engine],
        commit_group: CommitGroup,
        *,
        max_group_size: int = 2048,
        attach: socket.socket | None = None,
    ):
        self._config = encode_config(open_engine, commit_group, max_group_size)
        self._attach = attach  # a channel to another process's writer (see `channel_for_process`)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._process: _WriterProcess | None = None
        with self._lock:
            self._process = self._start()

    # --- callers ------------------------------------------------------------------------------------------------

    def stats(self) -> WriterStats:
        return self._call_blocking(STATS, None)  # type: ignore[no-any-return]

    @property
    def pid(self) -> int | None:
        """The writer process's id (None once closed)."""
        return None if self._closed or self._process is None else self._process.pid

    def alive(self) -> bool:
        """Whether the writer process (or, attached, the channel to it) is up."""
        with self._lock:
            return not self._closed and self._process is not None and self._process.alive()

    def append(self, work: Any) -> Any:
        """Commit `work` with whatever else is queued; blocks until durable."""
        return self._call_blocking(APPEND, work)

    async def append_async(self, work: Any) -> Any:
        """Commit `work` with whatever else is queued; resolves once durable."""
        loop = asyncio.get_running_loop()
        outcome = await self._channel_of(loop).submit(loop, next(self._ids), APPEND, work)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def call(self, write: Callable[[sa.Connection], Any]) -> Any:
        """Run `write(connection)` in its own transaction in the writer; blocks until committed."""
        return self._call_blocking(CALL, write)

    def channel_for_process(self) -> socket.socket:
        """A new channel to this writer for another process to `attach` to (make it inheritable and pass it on)."""
        return self._live().open_process_channel()

    def close(self) -> None:
        """Commit everything already sent, then stop the writer process (attached: just close the channel)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            process = self._process
        if process is not None:
            process.stop()

    # --- plumbing -----------------------------------------------------------------------------------------------

    def _live(self) -> _WriterProcess:
        with self._lock:
            if self._closed:
                raise RuntimeError("the record store is closed")
            if self._process is None or not self._process.alive():
                if self._process is not None and self._attach is not None:
                    raise WriterStopped("the shared record writer is gone (its serving process stopped)")
                log.warning("the record writer process is gone; starting a new one")
                self._process = self._start()
            return self._process

    def _start(self) -> _WriterProcess:
        return _WriterProcess(self._config, self._attach)

    def _call_blocking(self, kind: str, work: Any) -> Any:
        return self._live().call(next(self._ids), kind, work)

    def _channel_of(self, loop: asyncio.AbstractEventLoop) -> _LoopChannel:
        # A loop's open channel is the common case: no liveness check (a wait on the child and a lock) per append.
        # A writer that dies closes the channel, and the next call then checks and restarts it.
        process = self._process
        if process is not None and not self._closed:
            channel = process.channels.get(loop)
            if channel is not None and not channel.lost:
                return channel
        process = self._live()
        channel = process.channels.get(loop)
        if channel is None or channel.lost:
            channel = process.channels[loop] = process.open_channel(loop)
        return channel


class _WriterProcess:
    """One writer process: its control channel (blocking callers) and the channels of the event loops."""

    def __init__(self, config: str, attach: socket.socket | None = None) -> None:
        self._send_lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._pending_lock = threading.Lock()
        self.channels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopChannel] = weakref.WeakKeyDictionary()
        self._reader = FrameReader()
        self._popen: subprocess.Popen[bytes] | None = None
        if attach is not None:  # another process's writer: its channel is our control channel
            self._control = attach
            self._thread = threading.Thread(target=self._read_control, name="reef-record-acks", daemon=True)
            self._thread.start()
            return
        parent, child = socket.socketpair()
        self._control = parent
        self._popen = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, str(child.fileno()), config],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        child.close()
        parent.settimeout(START_TIMEOUT_S)
        try:
            ready = self._receive()
        except OSError as exc:
            ready = None
            failure: BaseException | None = exc
        else:
            failure = None
        if not ready:
            self._popen.kill()
            self._popen.wait()
            raise RuntimeError(f"the record writer process did not start ({failure or 'it exited'})")
        parent.settimeout(None)
        self._thread = threading.Thread(target=self._read_control, name="reef-record-acks", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def alive(self) -> bool:
        return (self._popen is None or self._popen.poll() is None) and self._thread.is_alive()

    def _receive(self) -> list[Any] | None:
        """The next messages on the control channel (at least one); None at its end."""
        while True:
            data = self._control.recv(1 << 18)
            if not data:
                return None
            messages = self._reader.feed(data)
            if messages:
                return messages

    def call(self, job_id: int, kind: str, work: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._pending_lock:
            self._pending[job_id] = future
        try:
            with self._send_lock:
                self._control.sendall(frame([(job_id, kind, work)]))
        except OSError as exc:
            with self._pending_lock:
                self._pending.pop(job_id, None)
            raise WriterStopped(f"the record writer process is gone ({exc})")
        outcome = future.result()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _read_control(self) -> None:
        try:
            while True:
                try:
                    messages = self._receive()
                except OSError:
                    messages = None
                if messages is None:
                    break
                for job_id, outcome in itertools.chain.from_iterable(messages):
                    with self._pending_lock:
                        future = self._pending.pop(job_id, None)
                    if future is not None:
                        future.set_result(outcome)
        finally:
            with self._pending_lock:
                pending, self._pending = self._pending, {}
            for future in pending.values():
                future.set_result(WriterStopped("the record writer process stopped before acknowledging"))

    def open_process_channel(self) -> socket.socket:
        """A new channel the writer reads, for whoever gets the returned end (another process, or an event loop)."""
        mine, theirs = socket.socketpair()
        try:
            with self._send_lock:
                socket.send_fds(self._control, [frame([])], [theirs.fileno()])
        finally:
            theirs.close()
        return mine

    def open_channel(self, loop: asyncio.AbstractEventLoop) -> _LoopChannel:
        """A new channel for `loop`: jobs can be submitted at once, they leave once it is connected."""
        mine = self.open_process_channel()
        channel = _LoopChannel()
        task = loop.create_task(loop.create_unix_connection(lambda: channel, sock=mine))
        task.add_done_callback(channel.connected)
        return channel

    def stop(self) -> None:
        """Ask the writer to commit what it has and exit; wait for it (attached: close our channel only)."""
        if self._popen is None:
            with contextlib.suppress(OSError):
                self._control.shutdown(socket.SHUT_RDWR)
            self._control.close()
            self._thread.join(timeout=STOP_TIMEOUT_S)
            return
        try:
            with self._send_lock:
                self._control.sendall(frame([(0, STOP, None)]))
            self._popen.wait(timeout=STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            log.warning("the record writer did not stop in time; killing it")
            self._popen.kill()
            self._popen.wait()
        finally:
            self._control.close()
            self._thread.join(timeout=STOP_TIMEOUT_S)


class _LoopChannel(asyncio.Protocol):
    """One event loop's channel to the writer: jobs submitted in one loop iteration leave in one write."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._reader = FrameReader()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._outbox: list[tuple[int, str, Any]] = []
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._flush()

    def connected(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            self.connection_lost(None if task.cancelled() else task.exception())

    def submit(self, loop: asyncio.AbstractEventLoop, job_id: int, kind: str, work: Any) -> asyncio.Future[Any]:
        """Queue a job now (it commits even if its caller is cancelled); the future's result is its outcome
        (the result, or the exception to raise)."""
        if self.lost:
            raise WriterStopped("the record writer process is gone")
        future = loop.create_future()
        self._pending[job_id] = future
        if not self._outbox:
            loop.call_soon(self._flush)
        self._outbox.append((job_id, kind, work))
        return future

    def _flush(self) -> None:
        if self._outbox and self._transport is not None and not self.lost:
            jobs, self._outbox = self._outbox, []
            self._transport.write(frame(jobs))

    def data_received(self, data: bytes) -> None:
        for acks in self._reader.feed(data):
            for job_id, outcome in acks:
                future = self._pending.pop(job_id, None)
                if future is not None and not future.done():  # a cancelled caller's records are durable all the same
                    future.set_result(outcome)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self._outbox = []
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result(WriterStopped("the record writer process stopped before acknowledging"))
