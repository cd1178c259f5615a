"""The record writer's own process: one write connection, group commits, acknowledgements only once durable.

Started by `GroupCommitWriter` (which calls `main([FD, CONFIG])` in a new interpreter), never by hand. It reads
jobs from every channel the parent opened (a control socket, plus one socket per event loop that appends), commits every
append that queued up while the previous commit ran in one transaction (one fsync), runs any other write alone
in submission order, and only then acknowledges each job on the channel it came from.

Writing from a separate process is what keeps commits fast under load: a writer thread would need the
interpreter lock between every database call, and the serving event loop holds it most of the time.

Frames, both ways: a 4-byte big-endian length, then a pickle. Parent to child: a list of `(job_id, kind, work)`;
child to parent: a list of `(job_id, outcome)`, where an outcome is the result or the exception to raise.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import logging
import os
import pickle
import selectors
import signal
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

log = logging.getLogger(__name__)

# commit_group(connection, works, thorough) -> one outcome per work: its result, or the exception for its caller.
# It runs inside an open transaction; raising from it rolls the whole group back. `thorough` is False on the
# first try of a group (it may trust ids this process minted) and True when a caller is retried alone.
CommitGroup = Callable[[sa.Connection, Sequence[Any], bool], list[Any]]

APPEND, CALL, STATS, STOP = "append", "call", "stats", "stop"
_HEADER = struct.Struct(">I")
_RACE_ATTEMPTS = 3
_READ_SIZE = 1 << 18


@dataclasses.dataclass(frozen=True, slots=True)
class WriterStats:
    """What the writer has committed so far."""

    groups: int
    appends: int
    largest_group: int
    fallbacks: int


def frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Splits a byte stream into the messages of its frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            end = _HEADER.size + size
            if len(self._buffer) < end:
                break
            messages.append(pickle.loads(self._buffer[_HEADER.size : end]))
            del self._buffer[:end]
        return messages


def encode_config(open_engine: Callable[[], sa.Engine], commit_group: CommitGroup, max_group_size: int) -> str:
    return base64.b64encode(pickle.dumps((open_engine, commit_group, max_group_size))).decode()


class GroupProcessor:
    """Commits the jobs of one round: consecutive appends together, any other write alone, in order."""

    def __init__(self, engine: sa.Engine, commit_group: CommitGroup) -> None:
        self._engine = engine
        self._commit_group = commit_group
        self._conn = engine.connect()
        self._groups = self._appends = self._largest_group = self._fallbacks = 0

    def stats(self) -> WriterStats:
        return WriterStats(self._groups, self._appends, self._largest_group, self._fallbacks)

    def close(self) -> None:
        self._conn.close()

    def process(self, jobs: list[tuple[str, Any]]) -> list[Any]:
        """One outcome per `(kind, work)` job."""
        outcomes: list[Any] = [None] * len(jobs)
        group: list[int] = []
        for index, (kind, work) in enumerate(jobs):
            if kind == APPEND:
                group.append(index)
                continue
            if group:
                self._commit_appends(group, jobs, outcomes)
                group = []
            outcomes[index] = self.stats() if kind == STATS else self._in_transaction(work)
        if group:
            self._commit_appends(group, jobs, outcomes)
        return outcomes

    def _commit_appends(self, group: list[int], jobs: list[tuple[str, Any]], outcomes: list[Any]) -> None:
        works = [jobs[index][1] for index in group]
        outcome = self._in_transaction(lambda conn: self._commit_group(conn, works, False))
        if not isinstance(outcome, BaseException):
            results = outcome
        else:
            # Something failed the whole group (an id another node inserted meanwhile, one this process did not
            # mint): commit each caller alone and thoroughly, so one caller's failure is not the others'.
            if len(group) > 1:
                self._fallbacks += 1
                log.warning("group commit of %d appends failed (%r); committing each alone", len(group), outcome)
            results = [self._commit_alone(work) for work in works]
        self._groups += 1
        self._appends += len(group)
        self._largest_group = max(self._largest_group, len(group))
        for index, result in zip(group, results, strict=True):
            outcomes[index] = result

    def _commit_alone(self, work: Any) -> Any:
        """Commit one caller's work in its own transaction; a unique violation (another node inserted one of its
        ids since we looked) is tried again, which then sees that row and answers idempotently or with Conflict."""
        outcome: Any = None
        for _ in range(_RACE_ATTEMPTS):
            outcome = self._in_transaction(lambda conn: self._commit_group(conn, [work], True))
            if not isinstance(outcome, BaseException):
                return outcome[0]
            if not isinstance(outcome, sa.exc.IntegrityError):
                return outcome
        return outcome

    def _in_transaction(self, write: Callable[[sa.Connection], Any]) -> Any:
        """`write(connection)` committed, or the exception that rolled it back."""
        try:
            with self._conn.begin():
                return write(self._conn)
        except Exception as exc:
            if self._conn.invalidated or self._conn.closed:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = self._engine.connect()
            return exc


class _Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = FrameReader()
        self.open = True


def _ack_frame(acks: list[tuple[int, Any]]) -> bytes:
    """The frame of these acknowledgements; an outcome that cannot cross the process boundary (an exception
    from a database driver, say) is replaced by an error that says what it was."""
    try:
        return frame(acks)
    except Exception:
        return frame([(job_id, _portable(outcome)) for job_id, outcome in acks])


def _portable(outcome: Any) -> Any:
    try:
        pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return RuntimeError(f"the record writer failed: {outcome!r}"[:2000])
    return outcome


def serve(control: socket.socket, processor: GroupProcessor, max_group_size: int) -> None:
    """Read, commit, acknowledge, until the control channel says stop or closes (the parent is gone)."""
    selector = selectors.DefaultSelector()
    channels = {control.fileno(): _Channel(control)}
    selector.register(control, selectors.EVENT_READ)
    backlog: list[tuple[_Channel, int, str, Any]] = []
    stopping = False
    while not stopping or backlog:
        if not backlog or len(backlog) < max_group_size:
            timeout = 0 if backlog else None
            for key, _ in selector.select(timeout):
                channel = channels[key.fd]
                stopping |= _read(channel, channels, selector, backlog, control)
                if not channel.open:
                    selector.unregister(channel.sock)
                    del channels[key.fd]
                    if channel.sock is control:
                        stopping = True
        if stopping:  # take whatever else was already sent before acknowledging the last round
            for channel in list(channels.values()):
                channel.sock.setblocking(False)
                _read(channel, channels, selector, backlog, control)
        round_, backlog = backlog[:max_group_size], backlog[max_group_size:]
        if not round_:
            continue
        try:
            outcomes = processor.process([(kind, work) for _, _, kind, work in round_])
        except Exception as exc:  # a bug here must fail the callers, not leave them waiting forever
            log.exception("the record writer failed")
            outcomes = [exc] * len(round_)
        replies: dict[_Channel, list[tuple[int, Any]]] = {}
        for (channel, job_id, _, _), outcome in zip(round_, outcomes, strict=True):
            replies.setdefault(channel, []).append((job_id, outcome))
        for channel, acks in replies.items():
            if channel.open:
                with contextlib.suppress(OSError):
                    channel.sock.setblocking(True)
                    channel.sock.sendall(_ack_frame(acks))
    selector.close()


def _read(
    channel: _Channel,
    channels: dict[int, _Channel],
    selector: selectors.BaseSelector,
    backlog: list[tuple[_Channel, int, str, Any]],
    control: socket.socket,
) -> bool:
    """Take what `channel` has ready into `backlog`; True once a stop was asked for (only the control channel may)."""
    stop = False
    try:
        # Any channel may hand over new ones: an event loop's, or another serving process's (which then hands over
        # its own event loops' channels on it).
        data, fds, _, _ = socket.recv_fds(channel.sock, _READ_SIZE, 16)
        for fd in fds:
            sock = socket.socket(fileno=fd)
            channels[fd] = _Channel(sock)
            selector.register(sock, selectors.EVENT_READ)
    except BlockingIOError:
        return False
    except OSError:
        data = b""
    if not data:
        channel.open = False
        return False
    for message in channel.reader.feed(data):
        for job_id, kind, work in message:
            if kind == STOP:
                stop = channel.sock is control
            else:
                backlog.append((channel, job_id, kind, work))
    return stop


def main(argv: list[str]) -> int:
    # The parent decides when to stop (a stop job, or the end of the control channel when it exits): a Ctrl-C or
    # a SIGTERM sent to the whole process group must not cut off the commits it still waits for while it drains.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fd, config = int(argv[0]), argv[1]
    open_engine, commit_group, max_group_size = pickle.loads(base64.b64decode(config))
    control = socket.socket(fileno=fd)
    engine = open_engine()
    processor = GroupProcessor(engine, commit_group)
    control.sendall(frame([(0, os.getpid())]))  # ready
    try:
        serve(control, processor, max_group_size)
    finally:
        processor.close()
        engine.dispose()
    return 0
