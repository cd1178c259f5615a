"""The audit queries of the `RecordStore` contract (filtered pages, byte-bounded pages, counts, the citation index),
run against every backend (see conftest: SQLite and PostgreSQL)."""

from __future__ import annotations

import itertools
import time

import pytest
import sqlalchemy as sa

from reef.core.errors import Conflict
from reef.core.records import Record
from reef.storage import RecordStore, SqlRecordStore
from reef.storage.base import RecordCounts
from reef.storage.schema import citations

from .conftest import OpenStore

_clock = itertools.count(1_800_000_000)


def inference(
    scenario: str = "s", *, release_id: str | None = "rel-a", size: int = 0, rid: str | None = None
) -> Record:
    payload = {"request": {"q": "x" * size}, "response": {}, "release_id": release_id}
    return Record.new(scenario, "inference", payload, created_at=float(next(_clock)), agent_record_id=rid)


def report(scenario: str = "s", *references: str, score: float | None = 1.0, rid: str | None = None) -> Record:
    payload: dict = {"references": list(references)}
    if score is not None:
        payload["score"] = score
    return Record.new(scenario, "report", payload, created_at=float(next(_clock)), agent_record_id=rid)


def ids(found: list[Record]) -> list[str]:
    return [r.agent_record_id for r in found]


def test_a_page_keeps_one_request_type_or_the_inferences_of_one_release(store: RecordStore) -> None:
    a1, a2, b1 = inference(release_id="rel-a"), inference(release_id="rel-a"), inference(release_id="rel-b")
    none = inference(release_id=None)
    stored = store.append([a1, report("s", a1.agent_record_id), b1, a2, none, report("s")])

    assert ids(store.page("s", request_type="inference")) == ids([a1, b1, a2, none])
    assert ids(store.page("s", request_type="report")) == ids([stored[1], stored[5]])
    assert ids(store.page("s", release_id="rel-a")) == ids([a1, a2])
    assert ids(store.page("s", release_id="rel-a", after_sequence=stored[0].sequence or 0)) == ids([a2])
    assert ids(store.page("s", release_id="rel-a", limit=1)) == ids([a1])
    assert store.page("s", release_id="rel-a", request_type="report") == []
    assert store.page("s", release_id="rel-none") == []


def test_a_report_carrying_a_release_id_is_not_an_inference_of_that_release(store: RecordStore) -> None:
    odd = Record.new("s", "report", {"release_id": "rel-a"}, created_at=time.time())
    served = inference(release_id="rel-a")
    store.append([odd, served])
    assert ids(store.page("s", release_id="rel-a")) == ids([served])


def test_a_byte_bounded_page_ends_at_the_record_that_reaches_the_budget(store: RecordStore) -> None:
    stored = store.append([inference(size=1000) for _ in range(5)])
    per_body = stored[0].body_bytes
    assert ids(store.page("s", max_body_bytes=per_body * 2)) == ids(stored[:2])
    assert ids(store.page("s", max_body_bytes=per_body * 2 + 1)) == ids(stored[:3])
    # One record bigger than the budget still comes back alone: a page never stalls.
    assert ids(store.page("s", max_body_bytes=1)) == ids(stored[:1])
    assert ids(store.page("s", after_sequence=4, max_body_bytes=1)) == ids(stored[4:])
    assert store.page("s", after_sequence=5, max_body_bytes=1) == []
    assert ids(store.page("s", limit=2, max_body_bytes=10**9)) == ids(stored[:2])


def test_counts_say_how_many_records_were_stored_and_evicted_and_the_last_sequence(store: RecordStore) -> None:
    assert store.counts("s") == RecordCounts(records=0, evicted=0, last_sequence=0)
    stored = store.append([inference(size=1000) for _ in range(4)] + [inference("other")])
    store.enforce_retention(max_body_bytes=stored[0].body_bytes * 2 + stored[4].body_bytes)
    assert store.counts("s") == RecordCounts(records=4, evicted=2, last_sequence=4)
    assert store.counts("other") == RecordCounts(records=1, evicted=0, last_sequence=1)


def test_the_reports_citing_a_receipt_are_found_in_sequence_order(store: RecordStore) -> None:
    first, second = inference(), inference()
    one = report("s", first.agent_record_id, second.agent_record_id)
    store.append([first, second, one])
    two = report("s", first.agent_record_id)
    store.append([two, report("s", second.agent_record_id)])

    assert store.citing("s", first.agent_record_id) == ids([one, two])
    assert len(store.citing("s", second.agent_record_id)) == 2
    assert store.citing("s", "rec_never_cited") == []
    # Only reports of the scenario asked about count (imports do not check where a receipt lives).
    assert store.citing("other", first.agent_record_id) == []


def test_a_retried_or_refused_report_indexes_nothing_twice(store: RecordStore) -> None:
    cited = inference()
    once = report("s", cited.agent_record_id, rid="rep-1")
    store.append([cited, once])
    store.append([once])  # an idempotent retry
    clash = report("s", cited.agent_record_id, score=0.0, rid="rep-1")
    with pytest.raises(Conflict):
        store.append([clash])
    assert store.citing("s", cited.agent_record_id) == ["rep-1"]


def test_citations_outlive_the_report_body(store: RecordStore) -> None:
    cited = inference()
    citing = report("s", cited.agent_record_id)
    store.append([cited, citing])
    store.enforce_retention(max_body_bytes=0)
    assert store.get("s", citing.agent_record_id).payload is None  # type: ignore[union-attr]
    assert store.citing("s", cited.agent_record_id) == [citing.agent_record_id]


def test_a_store_from_before_the_citation_index_fills_it_when_reopened(open_store: OpenStore) -> None:
    first = open_store()
    cited = inference()
    citing = report("s", cited.agent_record_id, "x" * 300)  # a receipt too long to be an id is not indexed
    first.append([cited, citing])
    assert isinstance(first, SqlRecordStore)
    with first._read_engine.begin() as conn:  # as a store created by an older Reef would be
        citations.drop(conn)
    first.close()

    second = open_store()
    assert second.citing("s", cited.agent_record_id) == [citing.agent_record_id]
    with second._read_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(citations)).scalar_one() == 1
