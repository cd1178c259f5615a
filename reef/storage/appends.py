"""One group of appends inside one transaction: idempotent retries, conflicts, per-scenario sequences.

Conflicts are found before anything is written, so a caller whose records conflict is left out of the group
(it gets `Conflict`, nothing of its call is stored) while every other caller's records commit.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reef.core.errors import Conflict
from reef.core.records import Record
from reef.storage.schema import record_from_row, record_row, records, sequences

# Keeps `IN (...)` lists well under SQLite's and PostgreSQL's bound-parameter limits.
ID_CHUNK = 500


@dataclasses.dataclass(frozen=True, slots=True)
class AppendWork:
    """One caller's `append`: its records and their encoded rows (encoded by the caller, off the writer)."""

    records: Sequence[Record]
    rows: Sequence[dict[str, Any]]

    @classmethod
    def of(cls, records: Sequence[Record]) -> AppendWork:
        return cls(records=list(records), rows=[record_row(r) for r in records])


def chunks(items: Sequence[str], size: int = ID_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Built once: the hot path should not pay for building and cache-keying statements per group.
_SELECT_BY_IDS = sa.select(records).where(records.c.agent_record_id.in_(sa.bindparam("ids", expanding=True)))
_INSERT = records.insert()


def _reserve_statement(insert: Any) -> Any:
    stmt = insert(sequences).values(scenario=sa.bindparam("scenario"), last_sequence=sa.bindparam("n"))
    return stmt.on_conflict_do_update(
        index_elements=[sequences.c.scenario],
        set_={"last_sequence": sequences.c.last_sequence + stmt.excluded.last_sequence},
    ).returning(sequences.c.last_sequence)


_RESERVE = {"postgresql": _reserve_statement(postgresql.insert), "sqlite": _reserve_statement(sqlite.insert)}


def stored_records(conn: sa.Connection, ids: Sequence[str]) -> dict[str, Record]:
    """The stored records with these ids, by id."""
    found: dict[str, Record] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for row in conn.execute(_SELECT_BY_IDS, {"ids": list(chunk)}).mappings():
            found[row["agent_record_id"]] = record_from_row(row)
    return found


def commit_appends(conn: sa.Connection, works: Sequence[AppendWork]) -> list[list[Record] | Conflict]:
    """Store each work's new records; returns per work its records with sequences, or the `Conflict` it hit."""
    stored = stored_records(conn, [r.agent_record_id for work in works for r in work.records])
    claimed: dict[str, Record] = {}  # ids this group will insert, first claimant wins
    plans: list[list[tuple[Record, dict[str, Any]]] | Conflict] = []
    for work in works:
        plan = _plan(work, stored, claimed)
        if not isinstance(plan, Conflict):
            claimed.update((record.agent_record_id, record) for record, _ in plan)
        plans.append(plan)

    new = [item for plan in plans if not isinstance(plan, Conflict) for item in plan]
    assigned = _assign_sequences(conn, new)
    if assigned:
        conn.execute(_INSERT, [row for _, row in new])
    done = {**stored, **assigned}
    return [
        plan if isinstance(plan, Conflict) else [done[r.agent_record_id] for r in work.records]
        for work, plan in zip(works, plans, strict=True)
    ]


def _plan(
    work: AppendWork, stored: dict[str, Record], claimed: dict[str, Record]
) -> list[tuple[Record, dict[str, Any]]] | Conflict:
    """The records of `work` to insert, or the Conflict that refuses the whole call."""
    fresh: dict[str, tuple[Record, dict[str, Any]]] = {}
    for record, row in zip(work.records, work.rows, strict=True):
        rid = record.agent_record_id
        prior = stored.get(rid) or claimed.get(rid) or (fresh[rid][0] if rid in fresh else None)
        if prior is None:
            fresh[rid] = (record, row)
        elif not _same_content(prior, record):
            return Conflict(f"record {rid} already exists with different content")
    return list(fresh.values())


def _same_content(a: Record, b: Record) -> bool:
    return a.content_hash == b.content_hash and a.scenario == b.scenario and a.request_type == b.request_type


def _assign_sequences(conn: sa.Connection, new: list[tuple[Record, dict[str, Any]]]) -> dict[str, Record]:
    """Reserve a block of sequences per scenario (locking its counter row) and number `new` in order."""
    counts = Counter(record.scenario for record, _ in new)
    # Lock counters in name order, so two PostgreSQL replicas never wait on each other in a cycle.
    next_sequence = {scenario: _reserve(conn, scenario, n) - n + 1 for scenario, n in sorted(counts.items())}
    assigned: dict[str, Record] = {}
    for record, row in new:
        sequence = next_sequence[record.scenario]
        next_sequence[record.scenario] = sequence + 1
        row["sequence"] = sequence
        assigned[record.agent_record_id] = dataclasses.replace(
            record, sequence=sequence, body_bytes=row["body_bytes"], consumed_step=None
        )
    return assigned


def _reserve(conn: sa.Connection, scenario: str, n: int) -> int:
    """Advance the scenario's counter by `n`; returns the last sequence reserved."""
    return int(conn.execute(_RESERVE[conn.dialect.name], {"scenario": scenario, "n": n}).scalar_one())
