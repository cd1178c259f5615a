"""The grid processor: one unit per complete step, attempts for the archive, samples only from varied groups."""

from __future__ import annotations

import time

from reef.core.records import Record
from reef.recipes.entropic import entropic_advantages
from reef.recipes.tttd_grid import GridProcessor


def _reward(score: float | None, valid: bool) -> float:
    return score if valid and score is not None else 0.0


def _cell(step: int, group: int, rollout: int, score: float, release: str = "rel_1") -> list[Record]:
    training = {"prompt_token_ids": [1], "completion_token_ids": [2], "logprobs": [-0.1]}
    inference = Record.new("s", "inference", {"release_id": release, "training": training}, time.time())
    solution = "[1]" if score > 0 else None
    meta = {"step": step, "group": group, "rollout": rollout, "parent_id": "seed-0", "solution": solution}
    report = Record.new(
        "s", "report", {"score": score, "references": [inference.agent_record_id], "metadata": meta}, time.time()
    )
    return [inference, report]


def _feed(processor: GridProcessor, records: list[Record]) -> None:
    for record in records:
        processor.ingest(record)


def test_a_complete_grid_is_one_unit_with_every_attempt_and_the_varied_groups_samples() -> None:
    processor = GridProcessor(2, 2, entropic_advantages, _reward)
    _feed(processor, _cell(1, 0, 0, 1.0) + _cell(1, 0, 1, 0.0) + _cell(1, 1, 0, 0.0))
    assert processor.ready() == 0 and processor.waiting_cells() == {1: 3}
    _feed(processor, _cell(1, 1, 1, 0.0))
    batch = processor.build_batch()
    assert batch is not None and len(batch.record_ids) == 8
    attempts = [s["attempt"] for s in batch.samples if "attempt" in s]
    samples = [s for s in batch.samples if "attempt" not in s]
    assert len(attempts) == 4 and len(samples) == 2  # group 1 is constant: dropped from training
    assert samples[0]["advantage"] > 0 > samples[1]["advantage"]
    assert processor.skipped["constant_group"] == 1


def test_a_second_report_for_a_filled_cell_is_skipped() -> None:
    processor = GridProcessor(1, 2, entropic_advantages, _reward)
    _feed(processor, _cell(1, 0, 0, 1.0) + _cell(1, 0, 0, 0.5))
    assert processor.skipped["duplicate_cell"] == 1 and processor.waiting_cells() == {1: 1}


def test_a_grid_served_by_two_releases_trains_nothing_but_keeps_its_attempts() -> None:
    processor = GridProcessor(1, 2, entropic_advantages, _reward)
    _feed(processor, _cell(1, 0, 0, 1.0, "rel_1") + _cell(1, 0, 1, 0.0, "rel_2"))
    batch = processor.build_batch()
    assert batch is not None and all("attempt" in s for s in batch.samples) and len(batch.samples) == 2
    assert processor.skipped["mixed_releases"] == 1
