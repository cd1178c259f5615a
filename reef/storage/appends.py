"""One group of appends inside one transaction: idempotent retries, conflicts, per-scenario sequences.

A record is known by its scenario and its id (`Key`): the same id in two scenarios names two records.

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
from reef.core.records import Record, minted_here
from reef.storage.citations import citations_of, cited_receipts, insert_citations
from reef.storage.schema import record_from_row, record_row, records, sequences

# Keeps `IN (...)` lists well under SQLite's and PostgreSQL's bound-parameter limits.
ID_CHUNK = 500


@dataclasses.dataclass(frozen=True, slots=True)
class AppendWork:
    """One caller's `append` as the writer sees it: the encoded rows (encoded by the caller, off the writer),
    per row, whether this process minted its id (then nobody can have stored it: no lookup needed), and the
    receipts each of its reports cites, as `(report id, scenario, receipts)` (inferences cite nothing: empty)."""

    rows: Sequence[dict[str, Any]]
    minted: Sequence[bool]
    cited: Sequence[tuple[str, str, tuple[str, ...]]] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        # Works cross to the writer process by pickle: a constructor call unpickles faster than slots' setstate.
        return (AppendWork, (self.rows, self.minted, self.cited))

    @classmethod
    def of(cls, records: Sequence[Record]) -> AppendWork:
        return cls(
            rows=[record_row(r) for r in records],
            minted=[minted_here(r.agent_record_id) for r in records],
            cited=tuple((r.agent_record_id, r.scenario, receipts) for r in records if (receipts := cited_receipts(r))),
        )


# Per record of a work: the sequence given to it now (the caller has the rest), or the record stored before.
Stored = int | Record
# What names a record: (scenario, agent_record_id).
Key = tuple[str, str]


def key_of(row: dict[str, Any]) -> Key:
    return (row["scenario"], row["agent_record_id"])


def stored_as(records: Sequence[Record], work: AppendWork, outcome: list[Stored]) -> list[Record]:
    """The caller's records as stored, from the writer's outcome for its work."""
    # Built field by field: `dataclasses.replace` inspects the class on every call (the hot path stores one a request).
    return [
        Record(
            agent_record_id=record.agent_record_id,
            scenario=record.scenario,
            request_type=record.request_type,
            payload=record.payload,
            content_hash=record.content_hash,
            created_at=record.created_at,
            sequence=item,
            consumed_step=None,
            body_bytes=row["body_bytes"],
        )
        if isinstance(item, int)
        else item
        for record, row, item in zip(records, work.rows, outcome, strict=True)
    ]


def chunks(items: Sequence[str], size: int = ID_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Built once: the hot path should not pay for building and cache-keying statements per group.
_SELECT_BY_IDS = sa.select(records).where(
    records.c.scenario == sa.bindparam("scenario"), records.c.agent_record_id.in_(sa.bindparam("ids", expanding=True))
)
_INSERT = records.insert()
# SQLite's insert as its driver takes it (positional parameters): the writer skips SQLAlchemy's per-row parameter
# processing, which cost more than the insert itself. `_INSERT_ORDER` is the parameters' order.
_SQLITE_INSERT = _INSERT.compile(
    dialect=sqlite.dialect(paramstyle="qmark"), column_keys=[c.name for c in records.columns]
)
_SQLITE_INSERT_SQL = str(_SQLITE_INSERT)
_INSERT_ORDER = tuple(_SQLITE_INSERT.positiontup or ())


def _reserve_statement(insert: Any) -> Any:
    stmt = insert(sequences).values(scenario=sa.bindparam("scenario"), last_sequence=sa.bindparam("n"))
    return stmt.on_conflict_do_update(
        index_elements=[sequences.c.scenario],
        set_={"last_sequence": sequences.c.last_sequence + stmt.excluded.last_sequence},
    ).returning(sequences.c.last_sequence)


_RESERVE = {"postgresql": _reserve_statement(postgresql.insert), "sqlite": _reserve_statement(sqlite.insert)}
_SQLITE_RESERVE = _RESERVE["sqlite"].compile(dialect=sqlite.dialect(paramstyle="qmark"))
_SQLITE_RESERVE_SQL = str(_SQLITE_RESERVE)
_RESERVE_ORDER = tuple(_SQLITE_RESERVE.positiontup or ())


def stored_records(conn: sa.Connection, scenario: str, ids: Sequence[str]) -> dict[str, Record]:
    """The stored records of `scenario` with these ids, by id."""
    found: dict[str, Record] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for row in conn.execute(_SELECT_BY_IDS, {"scenario": scenario, "ids": list(chunk)}).mappings():
            found[row["agent_record_id"]] = record_from_row(row)
    return found


def _stored_by_key(conn: sa.Connection, keys: Sequence[Key]) -> dict[Key, Record]:
    """The stored records with these keys, by key (one lookup per scenario)."""
    by_scenario: dict[str, list[str]] = {}
    for scenario, rid in keys:
        by_scenario.setdefault(scenario, []).append(rid)
    return {
        (scenario, rid): record
        for scenario, ids in by_scenario.items()
        for rid, record in stored_records(conn, scenario, ids).items()
    }


def commit_appends(conn: sa.Connection, works: Sequence[AppendWork], thorough: bool) -> list[list[Stored] | Conflict]:
    """Store each work's new rows; returns per work what each of its records is now, or the `Conflict` it hit.

    Unless `thorough`, ids minted by the caller's process are not looked up: a duplicate among them fails the
    insert (unique key), and the writer then retries each caller alone, thoroughly.
    """
    wanted = [
        key_of(row)
        for work in works
        for row, minted in zip(work.rows, work.minted, strict=True)
        if thorough or not minted
    ]
    stored = _stored_by_key(conn, wanted) if wanted else {}
    claimed: dict[Key, dict[str, Any]] = {}  # rows this group will insert, first claimant wins
    plans: list[list[dict[str, Any]] | Conflict] = []
    for work in works:
        plan = _plan(work, stored, claimed)
        if not isinstance(plan, Conflict):
            claimed.update((key_of(row), row) for row in plan)
        plans.append(plan)

    new = [row for plan in plans if not isinstance(plan, Conflict) for row in plan]
    _assign_sequences(conn, new)
    if new:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(_SQLITE_INSERT_SQL, [tuple(row[key] for key in _INSERT_ORDER) for row in new])
        else:
            conn.execute(_INSERT, new)
        cited = [
            c for work, plan in zip(works, plans, strict=True) if not isinstance(plan, Conflict) for c in work.cited
        ]
        if cited:
            insert_citations(conn, citations_of(cited, {key_of(row) for row in new}))
    sequences = {key_of(row): row["sequence"] for row in new}
    outcomes: list[list[Stored] | Conflict] = []
    for work, plan in zip(works, plans, strict=True):
        if isinstance(plan, Conflict):
            outcomes.append(plan)
            continue
        mine = {key_of(row) for row in plan}
        outcomes.append(
            [
                stored[key] if key in stored else sequences[key] if key in mine else _as_record(claimed[key])
                for key in (key_of(row) for row in work.rows)
            ]
        )
    return outcomes


def _plan(
    work: AppendWork, stored: dict[Key, Record], claimed: dict[Key, dict[str, Any]]
) -> list[dict[str, Any]] | Conflict:
    """The rows of `work` to insert, or the Conflict that refuses the whole call."""
    fresh: dict[Key, dict[str, Any]] = {}
    for row in work.rows:
        key = key_of(row)
        prior = stored.get(key) or claimed.get(key) or fresh.get(key)
        if prior is None:
            fresh[key] = row
        elif (why := _difference(prior, row)) is not None:
            return Conflict(
                f"record {row['agent_record_id']} already exists in scenario {row['scenario']!r} with different "
                f"content ({why}); a retry must send the same record, a new record needs a new agent_record_id"
            )
    return list(fresh.values())


def _difference(prior: Record | dict[str, Any], row: dict[str, Any]) -> str | None:
    """Why `row` is not a retry of the record stored (or claimed) under its key; None when it is."""
    if isinstance(prior, Record):
        prior = {"content_hash": prior.content_hash, "request_type": prior.request_type}
    if prior["request_type"] != row["request_type"]:
        return f"its request_type is {prior['request_type']!r}, this one's is {row['request_type']!r}"
    if prior["content_hash"] != row["content_hash"]:
        return "its payload differs from the stored one"
    return None


def _as_record(row: dict[str, Any]) -> Record:
    """A row another caller of the same group inserts, as the record it becomes."""
    return record_from_row(row)  # type: ignore[arg-type]


def _assign_sequences(conn: sa.Connection, new: list[dict[str, Any]]) -> None:
    """Reserve a block of sequences per scenario (locking its counter row) and number `new` in order."""
    counts = Counter(row["scenario"] for row in new)
    # Lock counters in name order, so two PostgreSQL replicas never wait on each other in a cycle.
    next_sequence = {scenario: _reserve(conn, scenario, n) - n + 1 for scenario, n in sorted(counts.items())}
    for row in new:
        row["sequence"] = next_sequence[row["scenario"]]
        next_sequence[row["scenario"]] += 1


def _reserve(conn: sa.Connection, scenario: str, n: int) -> int:
    """Advance the scenario's counter by `n`; returns the last sequence reserved."""
    if conn.dialect.name == "sqlite":
        values = {"scenario": scenario, "n": n}
        found = conn.exec_driver_sql(_SQLITE_RESERVE_SQL, tuple(values[key] for key in _RESERVE_ORDER))
        return int(found.scalar_one())
    return int(conn.execute(_RESERVE[conn.dialect.name], {"scenario": scenario, "n": n}).scalar_one())
