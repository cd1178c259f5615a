"""Rehearsal: a share of each training batch is earlier training items replayed, so a new lesson does not erase
the ones before it.

The store is a bounded reservoir of record ids: of every record a *published* step consumed (the commit log says
which), the `learning.rehearsal_max_items` whose hash with the scenario is smallest. That choice does not depend on
the order records are seen in, so the reservoir is re-derived from the commit log alone and is the same after a
restart; it holds ids only, the records themselves stay in the record store. A step replays
`round(n · share / (1 − share))` samples (n: its new samples), drawn from the reservoir in an order seeded by the
scenario and the step, and made into training units by a fresh processor of the recipe. They travel as the batch's
`replayed` samples, never in its `record_ids`: they are not consumed again. They are trained
`learning.rehearsal_passes` times a step (at most once an epoch), each pass in its own seeded order, dealt out to
the epochs (each epoch: every new sample and the next share of the passes): a share of 0.75 with two passes costs a
four-epoch step 2.5 times its new samples' training, not the four times of one pass an epoch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import random
from typing import Any

from reef.core.settings import Settings
from reef.learning.base import Batch, Processor, Recipe
from reef.releases.base import CommitLog
from reef.storage.base import RecordStore

PAGE_SIZE = 1000
MAX_FETCH_ROUNDS = 8  # cited records read back per draw: a report cites its inference, which cites nothing


def replay_count(new_samples: int, share: float) -> int:
    """How many replayed samples join `new_samples` new ones so that they make about `share` of the batch."""
    if share <= 0 or new_samples <= 0:
        return 0
    return round(new_samples * share / (1 - share))


def _rank(seed: str, record_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}\0{record_id}".encode(), digest_size=8).digest(), "big")


class Reservoir:
    """At most `max_items` record ids: those with the smallest hash (seeded by the scenario) of every id offered."""

    def __init__(self, scenario: str, max_items: int) -> None:
        self.scenario = scenario
        self.max_items = max_items
        self._heap: list[tuple[int, str]] = []  # (−rank, id): the largest rank kept is on top
        self._held: set[str] = set()

    def offer(self, record_id: str) -> None:
        """Keep `record_id` if it ranks among the `max_items` smallest seen so far."""
        if self.max_items <= 0 or record_id in self._held:
            return
        entry = (-_rank(self.scenario, record_id), record_id)
        if len(self._heap) < self.max_items:
            heapq.heappush(self._heap, entry)
        elif entry > self._heap[0]:
            _, evicted = heapq.heappushpop(self._heap, entry)
            self._held.discard(evicted)
        else:
            return
        self._held.add(record_id)

    def items(self) -> list[str]:
        """The ids held, in a fixed order."""
        return sorted(self._held)


class Rehearsal:
    """A scenario's rehearsal: its reservoir, kept up with the commit log, and the replay added to each batch."""

    def __init__(
        self,
        scenario: str,
        recipe: Recipe,
        share: float,
        max_items: int,
        records: RecordStore,
        commits: CommitLog,
        passes: int = 1,
    ) -> None:
        self.scenario = scenario
        self.recipe = recipe
        self.share = share
        self.passes = passes
        self.records = records
        self.commits = commits
        self.reservoir = Reservoir(scenario, max_items)
        self._read_through = -1  # the last step of the commit log folded into the reservoir

    @classmethod
    def of(
        cls, scenario: str, recipe: Recipe, settings: Settings, records: RecordStore, commits: CommitLog
    ) -> Rehearsal | None:
        """The scenario's rehearsal, or None when it is off (a share or a bound of 0) or the recipe's samples are not
        `replayable`."""
        learning = settings.learning
        if learning.rehearsal_share <= 0 or learning.rehearsal_max_items <= 0:
            return None
        processor = recipe.processor()
        if processor is None or not processor.replayable:
            return None
        passes = min(learning.rehearsal_passes, settings.training.epochs)
        return cls(scenario, recipe, learning.rehearsal_share, learning.rehearsal_max_items, records, commits, passes)

    def catch_up(self) -> None:
        """Fold the records consumed by published steps committed since the last look into the reservoir."""
        while page := self.commits.list(self.scenario, self._read_through, PAGE_SIZE):
            for commit in page:
                if commit.verdict == "published":
                    for record_id in commit.consumed_record_ids:
                        self.reservoir.offer(record_id)
            self._read_through = page[-1].step

    def held(self) -> list[str]:
        """The record ids replays are drawn from now, in a fixed order."""
        self.catch_up()
        return self.reservoir.items()

    def replay(
        self, batch: Batch, step: int, holdout_every: int = 0, hold_rollouts: bool = True
    ) -> list[dict[str, Any]]:
        """The earlier samples step `step` replays beside `batch` (blocking: it reads the stores); a record the
        held-out split (`Processor.hold_out`) takes for the gate now is not replayed."""
        wanted = replay_count(len(batch.samples), self.share)
        if wanted == 0:
            return []
        fresh = set(batch.record_ids)
        seed = f"{self.scenario}\0{step}"
        order = sorted((i for i in self.held() if i not in fresh), key=lambda i: _rank(seed, i))
        processor = self.recipe.processor()
        assert processor is not None  # a recipe that rehearses learns
        processor.hold_out(holdout_every, hold_rollouts)
        samples: list[dict[str, Any]] = []
        for start in range(0, len(order), wanted):
            self._feed(processor, order[start : start + wanted])
            while (built := processor.build_batch(partial=True)) is not None:
                samples.extend(built.samples)
            if len(samples) >= wanted:
                break
        return samples[:wanted]

    def _feed(self, processor: Processor, record_ids: list[str]) -> None:
        """Ingest the drawn reports, then the records they cite (consumed or not: these are replays)."""
        found = self.records.get_many(self.scenario, record_ids)
        for record_id in record_ids:
            record = found.get(record_id)
            if record is not None and record.request_type != "inference":
                processor.ingest(record)
        for _ in range(MAX_FETCH_ROUNDS):
            cited = processor.wanted()
            if not cited:
                return
            read = self.records.get_many(self.scenario, cited)
            if not read:
                return
            for record in sorted(read.values(), key=lambda r: r.sequence or 0):
                processor.ingest(record)

    def passes_over(self, samples: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
        """`samples` `passes` times over, each pass in its own order seeded by the scenario, the step and the pass:
        the training job deals them out to its epochs in this order."""
        passes = []
        for number in range(self.passes):
            order = random.Random(f"{self.scenario}\0{step}\0{number}")
            passes.extend(order.sample(samples, len(samples)))
        return passes


def with_replay(batch: Batch, samples: list[dict[str, Any]]) -> Batch:
    """`batch` with `samples` as its `replayed` ones; its own samples and the records it consumes are unchanged."""
    return dataclasses.replace(batch, replayed=list(samples)) if samples else batch
