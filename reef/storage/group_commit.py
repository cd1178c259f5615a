"""Group commit: one writer thread owns the write connection and commits every queued append in one transaction.

Callers enqueue work and wait on a future; the writer drains whatever queued up while it was busy, commits it
all with a single fsync, and only then settles the futures. A future is never settled before its commit, so a
receipt handed to a client always names a durable record.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

log = logging.getLogger(__name__)

# commit_group(connection, works) -> one outcome per work: its result, or the exception to raise to its caller.
# It runs inside an open transaction; raising from it rolls the whole group back.
CommitGroup = Callable[[sa.Connection, Sequence[Any]], list[Any]]


@dataclasses.dataclass(frozen=True, slots=True)
class WriterStats:
    """What the writer has committed so far."""

    groups: int
    appends: int
    largest_group: int
    fallbacks: int


@dataclasses.dataclass(slots=True)
class _Job:
    work: Any  # an append's work item, or a callable(connection) for a lone write
    size: int
    is_append: bool
    future: asyncio.Future[Any] | concurrent.futures.Future[Any]
    loop: asyncio.AbstractEventLoop | None  # set when `future` is an asyncio future


_STOP = object()
_RACE_ATTEMPTS = 3


class GroupCommitWriter:
    """The single writer of a database: groups appends, runs other writes alone, in submission order."""

    def __init__(
        self, engine: sa.Engine, commit_group: CommitGroup, *, max_group_size: int = 2048, name: str = "reef-writer"
    ) -> None:
        self._engine = engine
        self._commit_group = commit_group
        self._max_group_size = max_group_size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._submit_lock = threading.Lock()
        self._groups = self._appends = self._largest_group = self._fallbacks = 0
        self._conn = engine.connect()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stats(self) -> WriterStats:
        return WriterStats(self._groups, self._appends, self._largest_group, self._fallbacks)

    def append(self, work: Any, size: int) -> Any:
        """Commit `work` with whatever else is queued; blocks until durable."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._submit(_Job(work, size, True, future, None))
        return future.result()

    async def append_async(self, work: Any, size: int) -> Any:
        """Commit `work` with whatever else is queued; resolves once durable."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit(_Job(work, size, True, future, loop))
        return await future

    def call(self, write: Callable[[sa.Connection], Any]) -> Any:
        """Run `write(connection)` in its own transaction on the writer thread; blocks until committed."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._submit(_Job(write, 1, False, future, None))
        return future.result()

    def close(self) -> None:
        """Commit everything already queued, then stop the thread and release the connection."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join()

    def _submit(self, job: _Job) -> None:
        with self._submit_lock:
            if self._closed:
                raise RuntimeError("the record store is closed")
            self._queue.put(job)

    def _run(self) -> None:
        try:
            while True:
                jobs, stop = self._drain()
                try:
                    self._process(jobs)
                except Exception as exc:  # a bug here must fail the callers, not leave them waiting forever
                    log.exception("the record writer failed")
                    self._settle([(job, exc) for job in jobs])
                if stop:
                    return
        finally:
            self._conn.close()

    def _drain(self) -> tuple[list[_Job], bool]:
        """Block for one job, then take what else is queued, up to `max_group_size` records."""
        first = self._queue.get()
        if first is _STOP:
            return [], True
        jobs = [first]
        size = first.size
        while size < self._max_group_size:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            jobs.append(job)
            size += job.size
        return jobs, False

    def _process(self, jobs: list[_Job]) -> None:
        """Consecutive appends commit together; any other write commits alone, keeping submission order."""
        group: list[_Job] = []
        for job in jobs:
            if job.is_append:
                group.append(job)
                continue
            if group:
                self._commit_appends(group)
                group = []
            self._settle([(job, self._in_transaction(job.work))])
        if group:
            self._commit_appends(group)

    def _commit_appends(self, group: list[_Job]) -> None:
        outcome = self._in_transaction(lambda conn: self._commit_group(conn, [job.work for job in group]))
        if not isinstance(outcome, BaseException):
            outcomes = outcome
        elif len(group) == 1:
            outcomes = [self._commit_alone(group[0], outcome)]
        else:
            # Something failed the whole group (e.g. another node inserted one of the ids meanwhile):
            # commit each caller alone so one caller's failure is not the others'.
            self._fallbacks += 1
            log.warning("group commit of %d appends failed (%r); committing each alone", len(group), outcome)
            outcomes = [self._commit_alone(job, None) for job in group]
        self._groups += 1
        self._appends += len(group)
        self._largest_group = max(self._largest_group, len(group))
        self._settle(list(zip(group, outcomes, strict=True)))

    def _commit_alone(self, job: _Job, failure: BaseException | None) -> Any:
        """Commit one caller's work in its own transaction, after `failure` (None: not tried yet).

        A unique violation means another node inserted one of its ids since we looked; trying again sees
        that row and answers idempotently (or with `Conflict`).
        """
        for _ in range(_RACE_ATTEMPTS):
            if failure is not None and not isinstance(failure, sa.exc.IntegrityError):
                return failure
            outcome = self._in_transaction(lambda conn: self._commit_group(conn, [job.work]))
            if not isinstance(outcome, BaseException):
                return outcome[0]
            failure = outcome
        return failure

    def _in_transaction(self, write: Callable[[sa.Connection], Any]) -> Any:
        """`write(connection)` committed, or the exception that rolled it back."""
        try:
            with self._conn.begin():
                return write(self._conn)
        except Exception as exc:
            if self._conn.invalidated or self._conn.closed:
                self._reconnect()
            return exc

    def _reconnect(self) -> None:
        try:
            self._conn.close()
        finally:
            self._conn = self._engine.connect()

    def _settle(self, outcomes: list[tuple[_Job, Any]]) -> None:
        """Hand each caller its outcome; asyncio callers get one wake-up per event loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
        for job, outcome in outcomes:
            if job.loop is None:
                future = job.future
                assert isinstance(future, concurrent.futures.Future)
                if future.done():
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
            else:
                by_loop.setdefault(job.loop, []).append((job.future, outcome))  # type: ignore[arg-type]
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_async, settled)
            except RuntimeError:
                log.warning("an event loop closed before %d of its appends were acknowledged", len(settled))


def _settle_async(settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, outcome in settled:
        if future.done():  # the caller was cancelled; its records are durable all the same
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
