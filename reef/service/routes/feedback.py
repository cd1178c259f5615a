"""`POST /reef/report` and record import: validated in full before anything is stored."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.service.deps import MAX_SESSION_TAG_CHARS, live_scenario, scenario_of
from reef.service.schemas import RecordImport, RecordImportBatch, ReportBody
from reef.service.state import runtime_of, state_of

router = APIRouter(tags=["feedback"])


def _check_references(request: Request, scenario: str, references: list[str]) -> None:
    found = state_of(request).records.get_many(references)
    for index, receipt in enumerate(references):
        record = found.get(receipt)
        field = f"references[{index}]"
        if record is None:
            raise BadRequest(f"no record {receipt!r}", field=field)
        if record.request_type != "inference":
            raise BadRequest(f"{receipt!r} is a {record.request_type} record, not an inference", field=field)
        if record.scenario != scenario:
            raise BadRequest(f"{receipt!r} belongs to another scenario", field=field)


@router.post("/reef/report", summary="Report a score and/or feedback citing receipts")
async def report(request: Request, body: ReportBody) -> dict[str, Any]:
    scenario = scenario_of(request)
    payload = body.payload()
    if body.references:
        _check_references(request, scenario, body.references)
    await live_scenario(state_of(request), scenario)
    runtime_of(request).validate_report(scenario, payload)
    record = Record.new(scenario, "report", payload, created_at=time.time(), agent_record_id=body.agent_record_id)
    stored = await state_of(request).records.append_async([record])
    state_of(request).metrics.count_records("report")
    runtime_of(request).notify(scenario)
    return {"agent_record_id": stored[0].agent_record_id, "scenario": scenario, "request_type": "report"}


def _imported(scenario: str, item: RecordImport, field: str = "payload") -> Record:
    tags = item.payload.get("tags") if item.request_type == "inference" else None
    session = tags.get("session") if isinstance(tags, dict) else None
    if isinstance(session, str) and len(session) > MAX_SESSION_TAG_CHARS:
        raise BadRequest(f"at most {MAX_SESSION_TAG_CHARS} characters", field=f"{field}.tags.session")
    return Record.new(
        scenario, item.request_type, item.payload, created_at=time.time(), agent_record_id=item.agent_record_id
    )


def _receipt(record: Record) -> dict[str, Any]:
    """What an import acknowledges per record: `{agent_record_id, request_type, scenario}`, nothing more."""
    return {"agent_record_id": record.agent_record_id, "request_type": record.request_type, "scenario": record.scenario}


@router.post("/reef/records", summary="Import one record without calling a model")
async def import_record(request: Request, body: RecordImport) -> dict[str, Any]:
    scenario = scenario_of(request)
    record = _imported(scenario, body)
    await live_scenario(state_of(request), scenario)
    stored = await state_of(request).records.append_async([record])
    runtime_of(request).notify(scenario)
    return _receipt(stored[0])


@router.post("/reef/records/batch", summary="Import 1-1000 records atomically")
async def import_records(request: Request, body: RecordImportBatch) -> dict[str, Any]:
    scenario = scenario_of(request)
    ids = [item.agent_record_id for item in body.records if item.agent_record_id]
    if len(set(ids)) != len(ids):
        raise BadRequest("agent_record_id values must be unique within a batch", field="records")
    imported = [_imported(scenario, item, f"records[{i}].payload") for i, item in enumerate(body.records)]
    await live_scenario(state_of(request), scenario)
    stored = await state_of(request).records.append_async(imported)
    runtime_of(request).notify(scenario)
    # Each receipt names its scenario too: reef-client compares the list, key for key, with what it sent.
    return {"scenario": scenario, "records": [_receipt(r) for r in stored]}
