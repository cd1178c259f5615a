"""`POST /reef/report` and record import: validated in full before anything is stored."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from reef.core.errors import BadRequest
from reef.service.answers import as_json
from reef.service.deps import live_scenario, scenario_of
from reef.service.schemas import RecordImport, RecordImportBatch, ReportBody
from reef.service.state import records_of, runtime_of, state_of

router = APIRouter(tags=["feedback"])


@router.post("/reef/report", summary="Report a score and/or feedback citing receipts")
async def report(request: Request, body: ReportBody) -> dict[str, Any]:
    scenario = scenario_of(request)
    payload = body.payload()
    if body.references:
        await records_of(request).check_references(scenario, body.references)
    await live_scenario(state_of(request), scenario)
    runtime_of(request).validate_report(scenario, payload)
    stored = await records_of(request).store_report(scenario, payload, body.agent_record_id)
    state_of(request).metrics.count_records("report")
    return {"agent_record_id": stored["agent_record_id"], "scenario": scenario, "request_type": "report"}


@router.post("/reef/records", summary="Import one record without calling a model")
async def import_record(request: Request, body: RecordImport) -> dict[str, Any]:
    scenario = scenario_of(request)
    records = records_of(request)
    built = records.imports(scenario, [(body.request_type, body.payload, body.agent_record_id, "payload")])
    await live_scenario(state_of(request), scenario)
    return as_json((await records.store_imports(built))[0])


@router.post("/reef/records/batch", summary="Import 1-1000 records atomically")
async def import_records(request: Request, body: RecordImportBatch) -> dict[str, Any]:
    scenario = scenario_of(request)
    ids = [item.agent_record_id for item in body.records if item.agent_record_id]
    if len(set(ids)) != len(ids):
        raise BadRequest("agent_record_id values must be unique within a batch", field="records")
    records = records_of(request)
    items = [
        (r.request_type, r.payload, r.agent_record_id, f"records[{i}].payload") for i, r in enumerate(body.records)
    ]
    built = records.imports(scenario, items)
    await live_scenario(state_of(request), scenario)
    # Each receipt names its scenario too: reef-client compares the list, key for key, with what it sent.
    return {"scenario": scenario, "records": await records.store_imports(built)}
