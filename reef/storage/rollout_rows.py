"""The record store's rollout rows (`reef_rollouts`, `reef_rollout_errors`) on SQL: reads take a read connection,
writes run in the writer's transaction (`GroupCommitWriter.call`)."""

from __future__ import annotations

import time

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reef.storage.base import RolloutRow
from reef.storage.schema import rollout_errors, rollouts


def read(conn: sa.Connection, name: str) -> RolloutRow:
    """The scenario's rollout row (an empty one when nothing was stored)."""
    row = conn.execute(sa.select(rollouts).where(rollouts.c.name == name)).mappings().first()
    return _rollout_row(row) if row is not None else RolloutRow()


def read_all(conn: sa.Connection) -> dict[str, RolloutRow]:
    """Every stored rollout row, by scenario."""
    return {row["name"]: _rollout_row(row) for row in conn.execute(sa.select(rollouts)).mappings()}


def errors(conn: sa.Connection, rollout_id: str) -> dict[str, int]:
    """The failed requests counted per arm of `rollout_id`."""
    query = sa.select(rollout_errors.c.arm, rollout_errors.c.errors).where(rollout_errors.c.rollout_id == rollout_id)
    return {arm: int(count) for arm, count in conn.execute(query)}


def _rollout_row(row: sa.RowMapping) -> RolloutRow:
    document = orjson.loads(row["document"]) if row["document"] else None
    return RolloutRow(mode=row["mode"], document=document, version=int(row["version"]))


def set_mode(conn: sa.Connection, name: str, mode: str | None) -> None:
    """Store the scenario's rollout mode, leaving its document as it is."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(rollouts).values(name=name, mode=mode, document=None, version=0, updated_at=time.time())
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[rollouts.c.name], set_={"mode": mode, "updated_at": time.time()}
        )
    )


def put(conn: sa.Connection, name: str, text: str, expected_version: int) -> bool:
    """Replace the rollout document iff the row is at `expected_version` (0: no row, or none written yet)."""
    now = time.time()
    if expected_version == 0:
        insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        created = conn.execute(
            insert(rollouts)
            .values(name=name, mode=None, document=text, version=1, updated_at=now)
            .on_conflict_do_nothing(index_elements=[rollouts.c.name])
            .returning(rollouts.c.name)
        ).first()
        if created is not None:
            return True
    done = conn.execute(
        rollouts.update()
        .where(rollouts.c.name == name, rollouts.c.version == expected_version)
        .values(document=text, version=rollouts.c.version + 1, updated_at=now)
    )
    return done.rowcount > 0


def count_error(conn: sa.Connection, rollout_id: str, arm: str) -> None:
    """Add one failed request to the arm's counter (an upsert: atomic under concurrent replicas)."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(rollout_errors).values(rollout_id=rollout_id, arm=arm, errors=1)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[rollout_errors.c.rollout_id, rollout_errors.c.arm],
            set_={"errors": rollout_errors.c.errors + 1},
        )
    )
