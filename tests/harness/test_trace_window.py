"""A report citing an inference older than the trace processor's window is joined after the learner reads that
inference back by id (`Processor.wanted` → `feed_new`), not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from reef.harness import traces
from reef.harness.traces import TraceProcessor
from reef.learning.recovery import feed_new
from reef.storage.sql import open_record_store
from tests.harness.conftest import judged_records


async def test_a_report_citing_an_inference_older_than_the_window_is_read_back_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "MAX_REMEMBERED_INFERENCES", 2)
    store = open_record_store("sqlite", directory=tmp_path / "records")
    try:
        answers = {f"what is {n} + {n}?": str(2 * n) for n in range(1, 5)}
        records = judged_records("s", answers)
        inferences = [r for r in records if r.request_type == "inference"]
        reports = [r for r in records if r.request_type == "report"]
        store.append(inferences)  # four inferences first: the window keeps only the last two
        store.append(reports[:1])  # a report citing the oldest one
        processor = TraceProcessor(batch_size=1)
        await feed_new(store, "s", processor, 0)
        assert processor.wanted() == []  # read back by id within the same feed
        batch = processor.build_batch()
        assert batch is not None and batch.samples[0]["expected"] == "2"
        assert batch.samples[0]["messages"][0]["content"] == "what is 1 + 1?"
        assert set(batch.record_ids) == {inferences[0].agent_record_id, reports[0].agent_record_id}
    finally:
        store.close()
