"""Bringing a record store written by an older Reef to today's tables, in place, when it is opened.

The one migration so far: record ids became unique per scenario, so `reef_records` is keyed by
(scenario, agent_record_id) instead of the id alone, and `reef_citations` by (scenario, report id, receipt). A store
whose `reef_records` is keyed by the id alone is rebuilt: each old table is renamed aside, today's table is
created, every row is copied, and the old table is dropped. It all runs in the caller's transaction (both SQLite
and PostgreSQL make table changes transactional), so a crash leaves the old store as it was, never half of each.

SQLAlchemy Core rather than Alembic: one migration, detected from the tables themselves (their primary keys), needs
no revision directory, no version table and no separate command to run before `reef serve`.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from reef.storage.schema import citations, records

log = logging.getLogger(__name__)

_ASIDE = "_before_per_scenario_ids"


def migrate(conn: sa.Connection) -> None:
    """Migrate an older store in `conn`'s open transaction; a store already current (or new) is left alone."""
    if not any(_keyed_by_id_alone(conn, table) for table in (records, citations)):
        return
    if conn.dialect.name == "postgresql":
        # Replicas opening at once: the first migrates, the others wait here and then find the store current.
        conn.exec_driver_sql(f"LOCK TABLE {records.name} IN ACCESS EXCLUSIVE MODE")
    for table in (records, citations):
        if _keyed_by_id_alone(conn, table):  # looked at again: another replica may have migrated meanwhile
            _rebuild(conn, table)


def _keyed_by_id_alone(conn: sa.Connection, table: sa.Table) -> bool:
    """Whether `table` exists with a primary key that leaves out its scenario (written before ids were per scenario)."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(table.name):
        return False
    return "scenario" not in inspector.get_pk_constraint(table.name)["constrained_columns"]


def _rebuild(conn: sa.Connection, table: sa.Table) -> None:
    """`table` re-created with today's keys and indexes, holding every row it held."""
    aside = table.name + _ASIDE
    inspector = sa.inspect(conn)
    old_indexes = [index["name"] for index in inspector.get_indexes(table.name) if index["name"]]
    old_constraints = [
        name
        for name in [
            inspector.get_pk_constraint(table.name).get("name"),
            *(unique["name"] for unique in inspector.get_unique_constraints(table.name)),
        ]
        if name
    ]
    quoted = conn.dialect.identifier_preparer.quote
    conn.exec_driver_sql(f"ALTER TABLE {quoted(table.name)} RENAME TO {quoted(aside)}")
    # Names of indexes and constraints are per schema (PostgreSQL) or per database (SQLite): free them for today's.
    if conn.dialect.name == "postgresql":
        for name in old_constraints:
            conn.exec_driver_sql(f"ALTER TABLE {quoted(aside)} DROP CONSTRAINT IF EXISTS {quoted(name)}")
    for name in old_indexes:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {quoted(name)}")
    table.create(conn)
    columns = ", ".join(quoted(column.name) for column in table.columns)
    copied = conn.exec_driver_sql(f"INSERT INTO {quoted(table.name)} ({columns}) SELECT {columns} FROM {quoted(aside)}")
    conn.exec_driver_sql(f"DROP TABLE {quoted(aside)}")
    log.warning("record store: %s migrated to per-scenario record ids (%d rows)", table.name, copied.rowcount)
