"""A store written before record ids were per scenario is migrated in place when opened, losing nothing.

The tables below are the ones Reef wrote before (record ids global, citations keyed by report and receipt), written
out here so the test keeps meaning what it says whatever today's schema becomes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa

from reef.core.records import Record
from reef.storage import SqlRecordStore, open_record_store
from reef.storage.sql import SQLITE_FILENAME
from tests.conftest import PostgresSchema

OLD = sa.MetaData()
OLD_RECORDS = sa.Table(
    "reef_records",
    OLD,
    sa.Column("agent_record_id", sa.String(200), primary_key=True),
    sa.Column("scenario", sa.String(128), nullable=False),
    sa.Column("sequence", sa.BigInteger, nullable=False),
    sa.Column("request_type", sa.String(16), nullable=False),
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("body_bytes", sa.BigInteger, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("consumed_step", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("scenario", "sequence", name="reef_records_scenario_sequence"),
    sa.Index("reef_records_created_at", "created_at"),
)
OLD_SEQUENCES = sa.Table(
    "reef_sequences",
    OLD,
    sa.Column("scenario", sa.String(128), primary_key=True),
    sa.Column("last_sequence", sa.BigInteger, nullable=False),
)
OLD_CITATIONS = sa.Table(
    "reef_citations",
    OLD,
    sa.Column("report_id", sa.String(200), primary_key=True),
    sa.Column("inference_id", sa.String(200), primary_key=True),
    sa.Column("scenario", sa.String(128), nullable=False),
    sa.Index("reef_citations_inference", "inference_id"),
)
OLD_SCENARIOS = sa.Table(
    "reef_scenarios",
    OLD,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("recipe", sa.String(300), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
)


def _inference(scenario: str, rid: str, n: int) -> Record:
    return Record.new(scenario, "inference", {"request": {"n": n}, "response": "r"}, 1000.0 + n, agent_record_id=rid)


def _report(scenario: str, rid: str, *cited: str) -> Record:
    payload = {"score": 1.0, "references": list(cited)}
    return Record.new(scenario, "report", payload, 2000.0, agent_record_id=rid)


# What an older Reef held: two scenarios, a consumed record, an evicted body, reports citing receipts.
BEFORE = [
    (_inference("a", "rec_a1", 1), 1, 4, False),
    (_inference("a", "rec_a2", 2), 2, None, True),
    (_report("a", "rep_a", "rec_a1", "rec_a2"), 3, None, False),
    (_inference("b", "rec_b1", 3), 1, None, False),
    (_report("b", "rep_b", "rec_b1"), 2, 7, False),
]


def _write_old_store(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        OLD.create_all(conn)
        for record, sequence, consumed_step, evicted in BEFORE:
            body = orjson.dumps(record.payload).decode()
            conn.execute(
                OLD_RECORDS.insert().values(
                    agent_record_id=record.agent_record_id,
                    scenario=record.scenario,
                    sequence=sequence,
                    request_type=record.request_type,
                    payload=None if evicted else body,
                    body_bytes=0 if evicted else len(body),
                    content_hash=record.content_hash,
                    created_at=record.created_at,
                    consumed_step=consumed_step,
                )
            )
        conn.execute(
            OLD_SEQUENCES.insert(), [{"scenario": "a", "last_sequence": 3}, {"scenario": "b", "last_sequence": 2}]
        )
        conn.execute(
            OLD_CITATIONS.insert(),
            [
                {"report_id": "rep_a", "inference_id": "rec_a1", "scenario": "a"},
                {"report_id": "rep_a", "inference_id": "rec_a2", "scenario": "a"},
                {"report_id": "rep_b", "inference_id": "rec_b1", "scenario": "b"},
            ],
        )
        conn.execute(OLD_SCENARIOS.insert(), [{"name": "a", "recipe": "basic", "created_at": 1.0, "archived": False}])


OldStore = tuple[sa.Engine, Callable[[], SqlRecordStore]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldStore]:
    """An engine on an empty database, and how to open today's store on it."""
    opened: list[SqlRecordStore] = []
    if request.param == "sqlite":
        (tmp_path / "store").mkdir()
        engine = sa.create_engine(f"sqlite+pysqlite:///{tmp_path / 'store' / SQLITE_FILENAME}")

        def open_one() -> SqlRecordStore:
            opened.append(open_record_store("sqlite", directory=tmp_path / "store"))
            return opened[-1]
    else:
        schema: PostgresSchema = request.getfixturevalue("postgres_schema")
        engine = sa.create_engine(schema.sqlalchemy_url, connect_args={"options": f"-csearch_path={schema.name}"})

        def open_one() -> SqlRecordStore:
            opened.append(open_record_store("postgres", database_url=schema.url, schema=schema.name))
            return opened[-1]

    yield engine, open_one
    for store in opened:
        store.close()
    engine.dispose()


def test_an_old_store_is_migrated_when_opened_and_keeps_every_record_citation_and_sequence(old_store: OldStore) -> None:
    engine, open_store = old_store
    _write_old_store(engine)

    store = open_store()

    for record, sequence, consumed_step, evicted in BEFORE:
        read = store.get(record.scenario, record.agent_record_id)
        assert read is not None, record.agent_record_id
        assert (read.sequence, read.consumed_step, read.content_hash) == (sequence, consumed_step, record.content_hash)
        assert read.payload == (None if evicted else record.payload)
    assert [r.agent_record_id for r in store.page("a")] == ["rec_a1", "rec_a2", "rep_a"]
    assert store.citing("a", "rec_a1") == ["rep_a"] and store.citing("a", "rec_a2") == ["rep_a"]
    assert store.citing("b", "rec_b1") == ["rep_b"]
    assert store.scenario("a") is not None
    # Sequences go on from where they were, and an id of one scenario may now be used in another.
    (next_a,) = store.append([_inference("a", "rec_a3", 9)])
    (same_id_in_b,) = store.append([_inference("b", "rec_a1", 1)])
    assert (next_a.sequence, same_id_in_b.sequence) == (4, 3)
    assert store.get("a", "rec_a1").sequence == 1  # type: ignore[union-attr]
    keys = sa.inspect(engine).get_pk_constraint("reef_records")["constrained_columns"]
    assert sorted(keys) == ["agent_record_id", "scenario"]
    assert not sa.inspect(engine).has_table("reef_records_before_per_scenario_ids")


def test_a_migrated_store_opens_again_unchanged(old_store: OldStore) -> None:
    engine, open_store = old_store
    _write_old_store(engine)
    first = open_store()
    before = first.page("a") + first.page("b")
    first.close()

    again = open_store()

    assert again.page("a") + again.page("b") == before


def test_a_migration_that_fails_half_way_leaves_the_old_store_as_it_was(
    old_store: OldStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, open_store = old_store
    _write_old_store(engine)

    def crash(*_: object) -> None:
        raise RuntimeError("crashed after copying the records, before the citations")

    from reef.storage import migration

    rebuilt = migration._rebuild
    monkeypatch.setattr(
        migration, "_rebuild", lambda conn, table: crash() if table.name == "reef_citations" else rebuilt(conn, table)
    )
    with pytest.raises(RuntimeError, match="crashed"):
        open_store()
    inspector = sa.inspect(engine)
    assert inspector.get_pk_constraint("reef_records")["constrained_columns"] == ["agent_record_id"]
    assert not inspector.has_table("reef_records_before_per_scenario_ids")
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(OLD_RECORDS)).scalar_one() == len(BEFORE)

    monkeypatch.setattr(migration, "_rebuild", rebuilt)
    assert open_store().get("b", "rep_b") is not None
