"""Rebuilding a learner's state from the durable stores, at start and after a failed step.

The commit log is the truth about which step consumed which records. Resuming:
- rolls forward a release published by a step that crashed before its commit (the release already serves), and
  likewise a lineage tip kept by such a step,
- marks records that a committed step consumed but that were never marked (a crash after the commit point),
- feeds every other unconsumed record, in sequence order, to a fresh processor, so nothing consumed is
  trained twice and an unacknowledged batch is built again; consumed records are only shown (`observe`), as history.
Afterwards `feed_new` keeps the processor fed with what is appended.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time

from reef.core.releases import Commit, LineageTip, Release, Verdict
from reef.learning.base import Processor, Recipe
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore

log = logging.getLogger(__name__)

PAGE_SIZE = 1000


@dataclasses.dataclass(frozen=True)
class Resumed:
    """A learner's state after a resume: the filled processor, the last sequence read, the last step."""

    processor: Processor
    cursor: int
    last_step: int
    last_commit: Commit | None
    lineage_id: str | None  # the working lineage's tip as the commit log names it


def resume(
    scenario: str,
    recipe: Recipe,
    records: RecordStore,
    releases: ReleaseStore,
    commits: CommitLog,
    holdout_every: int = 0,
    hold_rollouts: bool = True,
) -> Resumed:
    """Repair what a crash left half done and refill a fresh processor (blocking; run in a worker thread).

    `holdout_every` and `hold_rollouts` are handed to the processor (`Processor.hold_out`) before it reads a record."""
    processor = recipe.processor()
    if processor is None:
        raise TypeError(f"recipe {recipe.name!r} does not learn (no processor)")
    processor.hold_out(holdout_every, hold_rollouts)
    history = commit_history(commits, scenario)
    head = releases.head(scenario)
    if head is not None and head.operation == "training":
        _roll_forward(commits, history, head, "published", head.parent_release_id)
    tip = releases.lineage(scenario)
    if tip is not None:
        _roll_forward(commits, history, tip, "kept", tip.lineage_base)
    last_step = history[-1].step if history else 0
    claimed = {record_id: commit.step for commit in history for record_id in commit.consumed_record_ids}
    owed: dict[int, list[str]] = collections.defaultdict(list)
    cursor = 0
    while page := records.page(scenario, cursor, PAGE_SIZE):
        for record in page:
            if record.consumed_step is not None:
                processor.observe(record)
                continue
            if record.agent_record_id in claimed:
                owed[claimed[record.agent_record_id]].append(record.agent_record_id)
                processor.observe(record)
            else:
                processor.ingest(record)
        cursor = page[-1].sequence or cursor
    for step, record_ids in owed.items():
        log.warning("learner %s: marking %d records of committed step %d", scenario, len(record_ids), step)
        records.mark_consumed(scenario, record_ids, step)
    judged = [commit.lineage for commit in history if commit.lineage is not None]
    lineage_id = judged[-1].release_id if judged else None
    return Resumed(processor, cursor, last_step, history[-1] if history else None, lineage_id)


def _roll_forward(
    commits: CommitLog, history: list[Commit], release: Release, verdict: Verdict, parent_release_id: str | None
) -> None:
    """Commit a step that stored `release` but crashed before its commit log entry (its step is newer)."""
    last_step = history[-1].step if history else 0
    if release.step <= last_step:
        return
    recovered = Commit(
        scenario=release.scenario,
        step=release.step,
        verdict=verdict,
        reason=f"recovered on resume: {verdict} before a crash, committed now",
        release_id=release.release_id,
        parent_release_id=parent_release_id,
        candidate_scores=[],
        current_scores=[],
        metrics={},
        consumed_record_ids=list(release.consumed_record_ids or ()),
        created_at=time.time(),
        trained_from=release.trained_from if verdict == "published" else release.parent_release_id,
        lineage=LineageTip(release.release_id if verdict == "kept" else None),
    )
    commits.append(recovered)
    history.append(recovered)
    log.warning(
        "learner %s: rolled forward step %d (%s %s)", release.scenario, release.step, verdict, release.release_id
    )


async def feed_new(records: RecordStore, scenario: str, processor: Processor, cursor: int) -> int:
    """Feed `processor` the unconsumed records after `cursor`, then the cited records it let go of (it may hold
    only the newest), read back by id; returns the new cursor. Reads run in worker threads, ingesting here."""
    while page := await asyncio.to_thread(records.page, scenario, cursor, PAGE_SIZE):
        for record in page:
            if record.consumed_step is None:
                processor.ingest(record)
            else:
                processor.observe(record)
        cursor = page[-1].sequence or cursor
    wanted = processor.wanted()
    if wanted:
        found = await asyncio.to_thread(records.get_many, scenario, wanted)
        for record in sorted(found.values(), key=lambda r: r.sequence or 0):
            if record.consumed_step is None:
                processor.ingest(record)
    return cursor


def commit_history(commits: CommitLog, scenario: str) -> list[Commit]:
    """Every commit of `scenario`, ascending."""
    history: list[Commit] = []
    while page := commits.list(scenario, history[-1].step if history else -1, PAGE_SIZE):
        history.extend(page)
    return history
