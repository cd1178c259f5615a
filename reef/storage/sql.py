"""`RecordStore` on SQL: SQLite (embedded default, WAL, fsync'd commits) or PostgreSQL (psycopg 3).

Every write goes through one `GroupCommitWriter` (a writer process with the one write connection); reads use
their own pool in this process, so they never wait behind a commit.
"""

from __future__ import annotations

import functools
import re
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reef.core.private_files import private_directory, private_file
from reef.core.records import Record, RequestType
from reef.storage import rollout_rows
from reef.storage.appends import ID_CHUNK, AppendWork, chunks, commit_appends, stored_as, stored_records
from reef.storage.base import RecordCounts, RecordStore, RolloutRow, ScenarioControl, ScenarioInfo
from reef.storage.citations import backfill_citations, citing_reports
from reef.storage.group_commit import GroupCommitWriter, WriterStats
from reef.storage.migration import migrate
from reef.storage.schema import citations, metadata, record_from_row, records, scenario_controls, scenarios

SQLITE_FILENAME = "records.sqlite3"
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class SqlRecordStore(RecordStore):
    """The record store over a write engine (one connection, owned by the writer) and a read engine."""

    def __init__(
        self, open_write_engine: Callable[[], sa.Engine], read_engine: sa.Engine, attach: socket.socket | None = None
    ) -> None:
        self._read_engine = read_engine
        with read_engine.begin() as conn:
            migrate(conn)  # a store written by an older Reef, in this same transaction
            indexed = sa.inspect(conn).has_table(citations.name)
            metadata.create_all(conn)
            if not indexed:  # a store from before the citation index: fill it once
                backfill_citations(conn)
        self._writer = GroupCommitWriter(open_write_engine, commit_appends, attach=attach)

    @property
    def backend(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._read_engine.dialect.name

    def stats(self) -> WriterStats:
        """Group-commit counters: groups committed, appends, largest group, fallbacks to one-by-one commits."""
        return self._writer.stats()

    @property
    def writer_pid(self) -> int | None:
        """The writer process's id (for operators and tests; None once closed)."""
        return self._writer.pid

    def append(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []
        work = AppendWork.of(records)
        return stored_as(records, work, self._writer.append(work))

    async def append_async(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []
        work = AppendWork.of(records)
        return stored_as(records, work, await self._writer.append_async(work))

    def get(self, scenario: str, agent_record_id: str) -> Record | None:
        query = sa.select(records).where(records.c.scenario == scenario, records.c.agent_record_id == agent_record_id)
        with self._read_engine.connect() as conn:
            found = conn.execute(query).mappings().first()
        return record_from_row(found) if found is not None else None

    def get_many(self, scenario: str, agent_record_ids: Sequence[str]) -> dict[str, Record]:
        with self._read_engine.connect() as conn:
            return stored_records(conn, scenario, agent_record_ids)

    def page(
        self,
        scenario: str,
        after_sequence: int = 0,
        limit: int = 100,
        *,
        request_type: RequestType | None = None,
        release_id: str | None = None,
        max_body_bytes: int | None = None,
    ) -> list[Record]:
        conditions = [records.c.scenario == scenario, records.c.sequence > after_sequence]
        if request_type is not None:
            conditions.append(records.c.request_type == request_type)
        if release_id is not None:
            conditions += [
                records.c.request_type == "inference",
                _payload_text(self.backend, "release_id") == release_id,
            ]
        with self._read_engine.connect() as conn:  # one read transaction: both queries see one snapshot
            if max_body_bytes is not None:
                last = _last_within(conn, conditions, limit, max_body_bytes)
                if last is None:
                    return []
                conditions.append(records.c.sequence <= last)
            query = sa.select(records).where(*conditions).order_by(records.c.sequence).limit(max(0, limit))
            return [record_from_row(row) for row in conn.execute(query).mappings()]

    def counts(self, scenario: str) -> RecordCounts:
        query = sa.select(
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(sa.case((records.c.payload.is_(None), 1), else_=0)), 0),
            sa.func.coalesce(sa.func.max(records.c.sequence), 0),
        ).where(records.c.scenario == scenario)
        with self._read_engine.connect() as conn:
            total, evicted, last_sequence = conn.execute(query).one()
        return RecordCounts(records=int(total), evicted=int(evicted), last_sequence=int(last_sequence))

    def citing(self, scenario: str, agent_record_id: str) -> list[str]:
        with self._read_engine.connect() as conn:
            return citing_reports(conn, scenario, agent_record_id)

    def mark_consumed(self, scenario: str, agent_record_ids: Sequence[str], step: int) -> None:
        if agent_record_ids:
            write = functools.partial(_mark_consumed, scenario=scenario, ids=list(agent_record_ids), step=step)
            self._writer.call(write)

    def enforce_retention(self, max_body_bytes: int) -> int:
        return int(self._writer.call(functools.partial(_evict_oldest, max_body_bytes=max_body_bytes)))

    def ensure_scenario(self, name: str, recipe: str) -> tuple[ScenarioInfo, bool]:
        return self._writer.call(functools.partial(_ensure_scenario, name=name, recipe=recipe))  # type: ignore[no-any-return]

    def scenario(self, name: str) -> ScenarioInfo | None:
        query = sa.select(scenarios).where(scenarios.c.name == name, scenarios.c.archived.is_(False))
        with self._read_engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _scenario_info(row) if row is not None else None

    def scenarios(self) -> list[ScenarioInfo]:
        query = sa.select(scenarios).where(scenarios.c.archived.is_(False)).order_by(scenarios.c.name)
        with self._read_engine.connect() as conn:
            return [_scenario_info(row) for row in conn.execute(query).mappings()]

    def archive_scenario(self, name: str) -> bool:
        return bool(self._writer.call(functools.partial(_archive_scenario, name=name)))

    def control(self, name: str) -> ScenarioControl:
        query = sa.select(scenario_controls).where(scenario_controls.c.name == name)
        with self._read_engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return ScenarioControl()
        request = orjson.loads(row["request"]) if row["request"] else None
        return ScenarioControl(row["training_mode"], bool(row["paused"]), request)

    def set_control(self, name: str, control: ScenarioControl) -> None:
        self._writer.call(functools.partial(_set_control, name=name, control=control))

    def rollout(self, name: str) -> RolloutRow:
        with self._read_engine.connect() as conn:
            return rollout_rows.read(conn, name)

    def rollouts(self) -> dict[str, RolloutRow]:
        with self._read_engine.connect() as conn:
            return rollout_rows.read_all(conn)

    def set_rollout_mode(self, name: str, mode: str | None) -> None:
        self._writer.call(functools.partial(rollout_rows.set_mode, name=name, mode=mode))

    def put_rollout(self, name: str, document: dict[str, Any], expected_version: int) -> bool:
        text = orjson.dumps(document).decode()
        put = functools.partial(rollout_rows.put, name=name, text=text, expected_version=expected_version)
        return bool(self._writer.call(put))

    def count_rollout_error(self, rollout_id: str, arm: str) -> None:
        self._writer.call(functools.partial(rollout_rows.count_error, rollout_id=rollout_id, arm=arm))

    def rollout_errors(self, rollout_id: str) -> dict[str, int]:
        with self._read_engine.connect() as conn:
            return rollout_rows.errors(conn, rollout_id)

    def writer_alive(self) -> bool:
        """Whether the writer process is up (a dead one is started again by the next write)."""
        return self._writer.alive()

    def channel_for_process(self) -> socket.socket:
        """A channel to this store's writer for another process to open the store with (`writer_fd`)."""
        return self._writer.channel_for_process()

    def close(self) -> None:
        self._writer.close()
        self._read_engine.dispose()


def open_record_store(
    backend: str,
    *,
    directory: Path | None = None,
    database_url: str | None = None,
    schema: str | None = None,
    writer_fd: int | None = None,
) -> SqlRecordStore:
    """Open (creating tables if needed) a record store.

    `backend` is `sqlite` (file `directory/records.sqlite3`, or `database_url` if given) or `postgres`
    (`database_url`, e.g. `postgresql://user@host:5432/db`, driven by psycopg 3; `schema` is created if missing and used
    as the search path, so tests can work in a fresh schema). `writer_fd`, when given, is a channel to another
    process's writer (`SqlRecordStore.channel_for_process`): this store then sends its writes there.
    """
    attach = socket.socket(fileno=writer_fd) if writer_fd is not None else None
    if backend == "sqlite":
        if database_url is None:
            if directory is None:
                raise ValueError("the sqlite record store needs a directory or a database_url")
            directory = private_directory(directory)
            database_url = f"sqlite+pysqlite:///{private_file(directory / SQLITE_FILENAME)}"
        return SqlRecordStore(
            functools.partial(_sqlite_engine, database_url, "BEGIN IMMEDIATE", 1),
            _sqlite_engine(database_url, "BEGIN", 8),
            attach,
        )
    if backend in ("postgres", "postgresql"):
        if database_url is None:
            raise ValueError("the postgres record store needs a database_url")
        database_url = _psycopg_url(database_url)
        return SqlRecordStore(
            functools.partial(_postgres_engine, database_url, schema, 1),
            _postgres_engine(database_url, schema, 8),
            attach,
        )
    raise ValueError(f"unknown record store backend {backend!r} (expected 'sqlite' or 'postgres')")


def _sqlite_engine(url: str, begin: str, pool_size: int) -> sa.Engine:
    engine = sa.create_engine(
        url, pool_size=pool_size, max_overflow=pool_size * 2, connect_args={"check_same_thread": False}
    )

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN below start transactions, not pysqlite's implicit (and late) one.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")  # in WAL mode: the WAL is fsync'd at every commit
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        # The writer takes the write lock up front, so its conflict check and its inserts see one snapshot.
        conn.exec_driver_sql(begin)

    return engine


def _postgres_engine(url: str, schema: str | None, pool_size: int) -> sa.Engine:
    connect_args: dict[str, Any] = {}
    if schema is not None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"invalid schema name {schema!r}")
        connect_args["options"] = f"-csearch_path={schema}"
    engine = sa.create_engine(
        url, pool_size=pool_size, max_overflow=pool_size * 2, pool_pre_ping=True, connect_args=connect_args
    )
    if schema is not None:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    return engine


def postgres_engine(url: str, schema: str | None, pool_size: int) -> sa.Engine:
    """A SQLAlchemy engine on PostgreSQL (psycopg 3) for `url` (any of the URL forms `open_record_store` takes)."""
    return _postgres_engine(_psycopg_url(url), schema, pool_size)


def libpq_url(url: str) -> str:
    """`url` as libpq (and psycopg.connect) takes it: no SQLAlchemy driver suffix."""
    return re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url)


def _psycopg_url(url: str) -> str:
    """Plain `postgresql://` / `postgres://` URLs mean psycopg 3 here (SQLAlchemy would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _payload_text(backend: str, key: str) -> sa.ColumnElement[Any]:
    """The payload's top-level `key` as text, in SQL (NULL when absent or evicted)."""
    if backend == "postgresql":
        # json, not jsonb: jsonb refuses a \u0000 escape anywhere in the body; json decodes only the value read.
        return sa.cast(records.c.payload, postgresql.JSON).op("->>")(key)
    return sa.func.json_extract(records.c.payload, f"$.{key}")


def _last_within(conn: sa.Connection, conditions: list[Any], limit: int, max_body_bytes: int) -> int | None:
    """The sequence that ends a page of at most `limit` records once their bodies reach `max_body_bytes`."""
    sizes = sa.select(records.c.sequence, records.c.body_bytes).where(*conditions).order_by(records.c.sequence)
    last, total = None, 0
    for sequence, body_bytes in conn.execute(sizes.limit(max(0, limit))):
        last, total = sequence, total + body_bytes
        if total >= max_body_bytes:
            break
    return last


def _mark_consumed(conn: sa.Connection, scenario: str, ids: list[str], step: int) -> None:
    for chunk in chunks(ids):
        mine = (records.c.scenario == scenario, records.c.agent_record_id.in_(chunk))
        conn.execute(records.update().where(*mine).values(consumed_step=step))


def _archive_scenario(conn: sa.Connection, name: str) -> bool:
    done = conn.execute(scenarios.update().where(scenarios.c.name == name).values(archived=True))
    return done.rowcount > 0


def _evict_oldest(conn: sa.Connection, max_body_bytes: int) -> int:
    """Drop the oldest bodies until the stored bodies total at most `max_body_bytes`."""
    total = int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(records.c.body_bytes), 0))).scalar_one())
    excess = total - max(0, max_body_bytes)
    if excess <= 0:
        return 0
    oldest = (
        sa.select(records.c.scenario, records.c.sequence, records.c.body_bytes)
        .where(records.c.body_bytes > 0)
        .order_by(records.c.created_at, records.c.scenario, records.c.sequence)
    )
    victims: dict[str, list[int]] = {}
    for scenario, sequence, body_bytes in conn.execute(oldest):
        if excess <= 0:
            break
        victims.setdefault(scenario, []).append(sequence)
        excess -= body_bytes
    for scenario, sequences in victims.items():
        for start in range(0, len(sequences), ID_CHUNK):
            chunk = sequences[start : start + ID_CHUNK]
            mine = (records.c.scenario == scenario, records.c.sequence.in_(chunk))
            conn.execute(records.update().where(*mine).values(payload=None, body_bytes=0))
    return sum(len(sequences) for sequences in victims.values())


def _ensure_scenario(conn: sa.Connection, name: str, recipe: str) -> tuple[ScenarioInfo, bool]:
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    created = (
        conn.execute(
            insert(scenarios)
            .values(name=name, recipe=recipe, created_at=time.time(), archived=False)
            .on_conflict_do_nothing(index_elements=[scenarios.c.name])
            .returning(scenarios.c.name)
        ).first()
        is not None
    )
    row = conn.execute(sa.select(scenarios).where(scenarios.c.name == name)).mappings().one()
    if created:
        return _scenario_info(row), True
    if row["archived"]:
        # An archived scenario is gone for clients; bringing it back is a creation, under the recipe asked for now.
        conn.execute(scenarios.update().where(scenarios.c.name == name).values(archived=False, recipe=recipe))
        return ScenarioInfo(name=name, recipe=recipe, created_at=row["created_at"], archived=False), True
    return _scenario_info(row), False


def _set_control(conn: sa.Connection, name: str, control: ScenarioControl) -> None:
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    values = {
        "training_mode": control.training_mode,
        "paused": control.paused,
        "request": orjson.dumps(control.request).decode() if control.request is not None else None,
        "updated_at": time.time(),
    }
    statement = insert(scenario_controls).values(name=name, **values)
    conn.execute(statement.on_conflict_do_update(index_elements=[scenario_controls.c.name], set_=values))


def _scenario_info(row: sa.RowMapping) -> ScenarioInfo:
    return ScenarioInfo(
        name=row["name"], recipe=row["recipe"], created_at=row["created_at"], archived=bool(row["archived"])
    )
