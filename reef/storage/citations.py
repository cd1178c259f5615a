"""The citation index: which report cites which receipt (`reef_citations`).

Rows are written in the same transaction as the report that cites (so the index never disagrees with what was
acknowledged) and kept when retention evicts the report's body. A store created before the index existed fills it
once, from the report bodies it still holds, when it is first opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reef.core.records import Record
from reef.storage.schema import citations, records

# Receipts longer than a record id can hold name no record (imported reports are stored as given).
_MAX_ID_CHARS = 200
_BATCH_ROWS = 500

# One citation of a report: (report id, scenario, cited receipt).
Citation = tuple[str, str, str]


def cited_receipts(record: Record) -> tuple[str, ...]:
    """The receipts `record` cites, as indexed: unique, in order, only strings that can be record ids."""
    if record.request_type != "report":
        return ()
    return tuple(dict.fromkeys(r for r in record.references() if 0 < len(r) <= _MAX_ID_CHARS))


def _insert_statement(insert: Any) -> Any:
    return insert(citations).on_conflict_do_nothing(
        index_elements=[citations.c.scenario, citations.c.report_id, citations.c.inference_id]
    )


_INSERT = {"postgresql": _insert_statement(postgresql.insert), "sqlite": _insert_statement(sqlite.insert)}


def insert_citations(conn: sa.Connection, found: Iterable[Citation]) -> None:
    """Index these citations (a citation already indexed is left as it is)."""
    rows = [
        {"report_id": report_id, "scenario": scenario, "inference_id": receipt}
        for report_id, scenario, receipt in found
    ]
    for start in range(0, len(rows), _BATCH_ROWS):
        conn.execute(_INSERT[conn.dialect.name], rows[start : start + _BATCH_ROWS])


def backfill_citations(conn: sa.Connection) -> None:
    """Index the citations of every stored report body (for a store opened before the index existed)."""
    after = ("", "")
    while True:  # keyset pages by (scenario, id): one page of bodies in memory at a time
        query = (
            sa.select(records.c.agent_record_id, records.c.scenario, records.c.payload)
            .where(
                records.c.request_type == "report",
                records.c.payload.is_not(None),
                sa.tuple_(records.c.scenario, records.c.agent_record_id) > sa.tuple_(*after),
            )
            .order_by(records.c.scenario, records.c.agent_record_id)
            .limit(_BATCH_ROWS)
        )
        page = conn.execute(query).all()
        if not page:
            return
        found: list[Citation] = []
        for report_id, scenario, text in page:
            report = Record(report_id, scenario, "report", orjson.loads(text), content_hash="", created_at=0.0)
            found.extend((report_id, scenario, receipt) for receipt in cited_receipts(report))
        insert_citations(conn, found)
        after = (page[-1][1], page[-1][0])


def citing_reports(conn: sa.Connection, scenario: str, agent_record_id: str) -> list[str]:
    """Ids of the reports of `scenario` that cite `agent_record_id`, in sequence order."""
    query = (
        sa.select(citations.c.report_id)
        .join(
            records,
            sa.and_(records.c.scenario == citations.c.scenario, records.c.agent_record_id == citations.c.report_id),
        )
        .where(citations.c.inference_id == agent_record_id, citations.c.scenario == scenario)
        .order_by(records.c.sequence)
    )
    return list(conn.execute(query).scalars())


def citations_of(
    works_rows: Sequence[tuple[str, str, tuple[str, ...]]], new_keys: set[tuple[str, str]]
) -> list[Citation]:
    """The citations of the rows a group really inserts (`new_keys`: (scenario, id)); retried and refused rows
    cite nothing new."""
    seen: set[tuple[str, str]] = set()
    found: list[Citation] = []
    for report_id, scenario, receipts in works_rows:
        key = (scenario, report_id)
        if key in new_keys and key not in seen:
            seen.add(key)
            found.extend((report_id, scenario, receipt) for receipt in receipts)
    return found
