"""Electing the one learner of each scenario among the replicas that share a record store.

A replica leads a scenario while it holds that scenario's lock, and the lock goes away with the replica:
- `PostgresElection`: a session-level advisory lock (`pg_try_advisory_lock`) keyed by the deployment (the
  database and schema the records live in) and the scenario, held on one dedicated connection. A replica that dies
  (kill -9) closes its connection and PostgreSQL releases its locks at once; one that loses its connection (a
  network cut, a restarted server) loses them too, which `holds` notices on its next round trip.
- `FileElection`: an exclusive `flock` on `<dir>/<scenario>.lock`, for SQLite replicas (or workers) on one
  machine; the kernel releases it when the process dies.
- `SoleElection`: one process and nothing shared: it always leads.

The leader writes its replica id where the others can read it (the connection's `application_name`, the lock
file's content), so `leader_of` names it. Elections are polled: a follower calls `try_lead` every few seconds
(see `reef.application.replica`), so a dead leader is replaced within `learning.election_timeout_s`.
Every method blocks (a database round trip or a file operation): call them from a worker thread.
"""

from __future__ import annotations

import abc
import fcntl
import hashlib
import os
import socket
import threading
from pathlib import Path
from typing import Any

from reef.core.scenarios import validate_scenario_name
from reef.releases.names import encode_name


def default_replica_id() -> str:
    """`<hostname>:<pid>`: distinct for every serving process, workers of one `reef serve` included."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lock_key(deployment: str, scenario: str) -> int:
    """The signed 64-bit advisory lock key of `scenario` in `deployment` (a stable hash of both)."""
    digest = hashlib.blake2b(f"reef-learner\0{deployment}\0{scenario}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Election(abc.ABC):
    """Which replica learns which scenario: at most one holds a scenario's lock at any time."""

    replica_id: str

    @abc.abstractmethod
    def try_lead(self, scenario: str) -> bool:
        """Take the scenario's lock if it is free (True), or say it is held elsewhere (False); True if held here."""

    @abc.abstractmethod
    def holds(self, scenario: str) -> bool:
        """Whether this replica still holds the scenario's lock, checked against the lock's owner (not a cache)."""

    @abc.abstractmethod
    def leader_of(self, scenario: str) -> str | None:
        """The replica id of the scenario's leader, None when nobody leads it."""

    @abc.abstractmethod
    def resign(self, scenario: str) -> None:
        """Release the scenario's lock if held here."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release every lock held here."""


class SoleElection(Election):
    """A single process with stores of its own: it leads every scenario."""

    def __init__(self, replica_id: str | None = None) -> None:
        self.replica_id = replica_id or default_replica_id()

    def try_lead(self, scenario: str) -> bool:
        return True

    def holds(self, scenario: str) -> bool:
        return True

    def leader_of(self, scenario: str) -> str | None:
        return self.replica_id

    def resign(self, scenario: str) -> None:
        return None

    def close(self) -> None:
        return None


class FileElection(Election):
    """`flock` on one file per scenario under `directory` (the processes must share that directory's machine)."""

    def __init__(self, directory: Path, replica_id: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.replica_id = replica_id or default_replica_id()
        self._held: dict[str, int] = {}  # scenario -> the open descriptor that holds its lock
        self._lock = threading.Lock()

    def _path(self, scenario: str) -> Path:
        return self.directory / f"{encode_name(validate_scenario_name(scenario, field='scenario'))}.lock"

    def try_lead(self, scenario: str) -> bool:
        with self._lock:
            if scenario in self._held:
                return True
            fd = os.open(self._path(scenario), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            os.ftruncate(fd, 0)
            os.pwrite(fd, self.replica_id.encode(), 0)
            self._held[scenario] = fd
            return True

    def holds(self, scenario: str) -> bool:
        with self._lock:
            return scenario in self._held

    def leader_of(self, scenario: str) -> str | None:
        with self._lock:
            if scenario in self._held:
                return self.replica_id
        path = self._path(scenario)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:  # a shared lock we can take means nobody holds the exclusive one
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return os.pread(fd, 1024, 0).decode(errors="replace") or None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def resign(self, scenario: str) -> None:
        with self._lock:
            fd = self._held.pop(scenario, None)
        if fd is not None:
            os.close(fd)  # closing the only descriptor releases the flock

    def close(self) -> None:
        for scenario in list(self._held):
            self.resign(scenario)


class PostgresElection(Election):
    """Session-level advisory locks on one dedicated connection (psycopg 3, autocommit).

    `url` is a libpq URL; `deployment` names what the replicas share (by default the database URL's database and
    `search_path`), so two deployments in one database elect separately."""

    # A cut network must not leave a dead leader's session (and its locks) alive for the kernel's default two hours.
    KEEPALIVES: dict[str, Any] = {
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
    }

    def __init__(self, url: str, deployment: str, replica_id: str | None = None, connect_timeout_s: float = 5) -> None:
        self.url = url
        self.deployment = deployment
        self.replica_id = replica_id or default_replica_id()
        self.connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:  # a lost session lost its locks with it
                self._held.clear()
                self._conn.close()
            self._conn = psycopg.connect(
                self.url,
                autocommit=True,
                application_name=self.replica_id[:63],
                connect_timeout=max(1, int(self.connect_timeout_s)),
                **self.KEEPALIVES,
            )
        return self._conn

    def _run(self, sql: str, *params: Any) -> Any:
        import psycopg

        try:
            return self._connection().execute(sql, params).fetchone()
        except psycopg.OperationalError:
            self._held.clear()
            if self._conn is not None:
                self._conn.close()
            raise

    def try_lead(self, scenario: str) -> bool:
        with self._lock:
            if scenario in self._held and self._alive():
                return True
            row = self._run("SELECT pg_try_advisory_lock(%s)", lock_key(self.deployment, scenario))
            if row and row[0]:
                self._held.add(scenario)
                return True
            return False

    def _alive(self) -> bool:
        import psycopg

        try:
            self._run("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def holds(self, scenario: str) -> bool:
        with self._lock:
            if scenario not in self._held:
                return False
            key = lock_key(self.deployment, scenario)
            import psycopg

            try:  # the lock as the server sees it, held by this very session
                row = self._run(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()"
                    " AND classid = %s AND objid = %s AND objsubid = 1",
                    *_key_halves(key),
                )
            except psycopg.OperationalError:
                return False
            if not row or not row[0]:
                self._held.discard(scenario)
                return False
            return True

    def leader_of(self, scenario: str) -> str | None:
        with self._lock:
            row = self._run(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = 1",
                *_key_halves(lock_key(self.deployment, scenario)),
            )
            return row[0] if row else None

    def resign(self, scenario: str) -> None:
        with self._lock:
            if scenario in self._held:
                self._held.discard(scenario)
                import psycopg

                try:
                    self._run("SELECT pg_advisory_unlock(%s)", lock_key(self.deployment, scenario))
                except psycopg.OperationalError:
                    pass  # the session is gone, and its locks with it

    def close(self) -> None:
        with self._lock:
            self._held.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _key_halves(key: int) -> tuple[int, int]:
    """How pg_locks shows a bigint advisory key: (high 32 bits, low 32 bits) as unsigned oids."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF
