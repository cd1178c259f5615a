"""What the HTTP edge stores and reads back of a scenario's records: reports and imports built into records and
made durable, pages and single records for the audit routes, the export, and the retention of bodies.

Every store call that may block runs in a worker thread, so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import orjson

from reef.core.errors import BadRequest, NotFound
from reef.core.records import MAX_SESSION_TAG_CHARS, Record, RequestType
from reef.core.views import ImportItem, Receipt, RecordPage, RecordSummary, RecordView, ScenarioView
from reef.storage.base import RecordCounts, RecordStore

log = logging.getLogger(__name__)

RETENTION_INTERVAL_S = 60.0
# An export page: at most this many records, ending early once their bodies reach this many bytes.
EXPORT_PAGE_RECORDS = 500
EXPORT_PAGE_BYTES = 8 * 1024 * 1024


class Recording:
    """A deployment's records as the edge sees them; `notify` wakes the learner of a scenario that got new ones."""

    def __init__(self, records: RecordStore, notify: Callable[[str], None]) -> None:
        self.records = records
        self._notify = notify

    # ---- writing ---------------------------------------------------------------------------------------------

    async def check_references(self, scenario: str, references: Sequence[str]) -> None:
        """BadRequest naming the first receipt that is not an inference record of `scenario` (receipts resolve
        within the report's scenario: another scenario's record of the same id is not this one)."""
        found = await asyncio.to_thread(self.records.get_many, scenario, list(references))
        for index, receipt in enumerate(references):
            record = found.get(receipt)
            field = f"references[{index}]"
            if record is None:
                raise BadRequest(f"no record {receipt!r} in scenario {scenario!r}", field=field)
            if record.request_type != "inference":
                raise BadRequest(f"{receipt!r} is a {record.request_type} record, not an inference", field=field)

    async def store_report(self, scenario: str, payload: dict[str, Any], agent_record_id: str | None) -> Receipt:
        """Store a (validated) report durably, then wake the scenario's learner."""
        record = Record.new(scenario, "report", payload, created_at=time.time(), agent_record_id=agent_record_id)
        stored = await self.records.append_async([record])
        self._notify(scenario)
        return receipt(stored[0])

    def imports(self, scenario: str, items: Sequence[ImportItem]) -> list[Record]:
        """The records of an import, checked before anything is stored (or a scenario created): a session tag over
        128 characters is a BadRequest naming its item's field."""
        return [imported_record(scenario, *item) for item in items]

    async def store_imports(self, records: Sequence[Record]) -> list[Receipt]:
        """Store the records of an import atomically, then wake their scenario's learner."""
        stored = await self.records.append_async(records)
        for scenario in sorted({record.scenario for record in stored}):
            self._notify(scenario)
        return [receipt(record) for record in stored]

    async def remember_inference(self, record: Record) -> None:
        """Make an inference record durable (the learner is not woken: reports complete training units)."""
        await self.records.append_async([record])

    # ---- reading ---------------------------------------------------------------------------------------------

    async def scenario_views(self) -> list[ScenarioView]:
        """Every live scenario the store knows."""
        infos = await asyncio.to_thread(self.records.scenarios)
        return [{"name": i.name, "recipe": i.recipe, "created_at": i.created_at} for i in infos]

    async def page(
        self,
        scenario: str,
        after_sequence: int,
        limit: int,
        request_type: RequestType | None = None,
        release_id: str | None = None,
    ) -> RecordPage:
        """Record metadata after `after_sequence`; `next_after_sequence` is null exactly at the end."""
        # One more than asked says whether another record follows.
        found = await asyncio.to_thread(
            self.records.page, scenario, after_sequence, limit + 1, request_type=request_type, release_id=release_id
        )
        page = found[:limit]
        return {
            "records": [summary(r) for r in page],
            "next_after_sequence": page[-1].sequence if len(found) > limit else None,
        }

    async def record(self, scenario: str, agent_record_id: str) -> RecordView:
        """One record with its payload (an inference with the reports citing it); NotFound if absent."""

        def read() -> RecordView:
            record = self.records.get(scenario, agent_record_id)
            if record is None:
                raise NotFound(f"no record {agent_record_id!r} in scenario {scenario!r}")
            found = cast(RecordView, {**summary(record), "payload": record.payload})
            if record.request_type == "inference":
                found["cited_by"] = self.records.citing(scenario, agent_record_id)
            return found

        return await asyncio.to_thread(read)

    async def export_counts(self, scenario: str) -> RecordCounts:
        """How many records an export starting now covers, and how many of them retention evicted."""
        return await asyncio.to_thread(self.records.counts, scenario)

    async def envelope_lines(self, scenario: str, last_sequence: int) -> AsyncIterator[bytes]:
        """`{agent_record_id, request_type, payload}` JSONL chunks through `last_sequence`, one store page at a time
        (an evicted record is left out)."""
        cursor = 0
        while cursor < last_sequence:
            page = await asyncio.to_thread(
                self.records.page, scenario, cursor, EXPORT_PAGE_RECORDS, max_body_bytes=EXPORT_PAGE_BYTES
            )
            if not page:
                return
            chunk = b"".join(
                orjson.dumps(
                    {"agent_record_id": r.agent_record_id, "request_type": r.request_type, "payload": r.payload}
                )
                + b"\n"
                for r in page
                if r.payload is not None and r.sequence is not None and r.sequence <= last_sequence
            )
            if chunk:
                yield chunk
            cursor = page[-1].sequence or last_sequence

    # ---- retention -------------------------------------------------------------------------------------------

    async def enforce_retention(self, max_body_bytes: int) -> None:
        """Every minute, evict the oldest record bodies beyond `max_body_bytes` (hashes are kept)."""
        while True:
            try:
                evicted = await asyncio.to_thread(self.records.enforce_retention, max_body_bytes)
                if evicted:
                    log.info("retention: evicted %d record bodies", evicted)
            except Exception:
                log.exception("retention failed")
            await asyncio.sleep(RETENTION_INTERVAL_S)


def summary(record: Record) -> RecordSummary:
    """A record's metadata as the audit routes page it."""
    return cast(RecordSummary, record.summary())


def receipt(record: Record) -> Receipt:
    """What storing a record acknowledges: `{agent_record_id, request_type, scenario}`, nothing more."""
    return {"agent_record_id": record.agent_record_id, "request_type": record.request_type, "scenario": record.scenario}


def imported_record(
    scenario: str, request_type: RequestType, payload: dict[str, Any], agent_record_id: str | None, field: str
) -> Record:
    """A record imported without calling a model; BadRequest naming `field.tags.session` when its session tag is
    longer than 128 characters."""
    tags = payload.get("tags") if request_type == "inference" else None
    session = tags.get("session") if isinstance(tags, dict) else None
    if isinstance(session, str) and len(session) > MAX_SESSION_TAG_CHARS:
        raise BadRequest(f"at most {MAX_SESSION_TAG_CHARS} characters", field=f"{field}.tags.session")
    return Record.new(scenario, request_type, payload, created_at=time.time(), agent_record_id=agent_record_id)
