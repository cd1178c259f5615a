"""The `RecordStore` contract. Every implementation passes `tests/storage/test_contract.py`."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any

from reef.core.records import Record, RequestType


@dataclasses.dataclass(frozen=True, slots=True)
class ScenarioInfo:
    """A scenario as the store knows it."""

    name: str
    recipe: str
    created_at: float
    archived: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ScenarioControl:
    """How operators set a scenario to train: its mode (None: the deployment's), paused, a requested step."""

    training_mode: str | None = None
    paused: bool = False
    request: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RecordCounts:
    """A scenario's records at one moment: how many, how many of them lost their body, the last sequence."""

    records: int
    evicted: int
    last_sequence: int


@dataclasses.dataclass(frozen=True, slots=True)
class RolloutRow:
    """A scenario's rollout settings and state: its rollout mode (None: the deployment's), its current or last
    rollout as a JSON document (None: never one), and the row's version (compare-and-swap on writes)."""

    mode: str | None = None
    document: dict[str, Any] | None = None
    version: int = 0


class RecordStore(abc.ABC):
    """Durable, append-only store of records, with per-scenario sequences."""

    @abc.abstractmethod
    def append(self, records: Sequence[Record]) -> list[Record]:
        """Store `records` atomically and durably (fsync'd) before returning them with their `sequence`.

        A record whose id exists with the same `content_hash` returns the stored one (idempotent retry);
        the same id with a different hash raises `Conflict` and nothing of the call is stored.
        """

    @abc.abstractmethod
    async def append_async(self, records: Sequence[Record]) -> list[Record]:
        """`append` for the event loop: concurrent calls share one fsync'd transaction (group commit)."""

    @abc.abstractmethod
    def get(self, agent_record_id: str) -> Record | None:
        """The record with this id, or None."""

    @abc.abstractmethod
    def get_many(self, agent_record_ids: Sequence[str]) -> dict[str, Record]:
        """The records with these ids that exist, by id."""

    @abc.abstractmethod
    def page(
        self,
        scenario: str,
        after_sequence: int = 0,
        limit: int = 100,
        *,
        request_type: RequestType | None = None,
        release_id: str | None = None,
        max_body_bytes: int | None = None,
    ) -> list[Record]:
        """Records of `scenario` with sequence > `after_sequence`, ascending, at most `limit`.

        `request_type` keeps one type; `release_id` keeps the inferences that release served (an evicted body no
        longer says which); `max_body_bytes` ends the page at the first record that brings its bodies to that many
        bytes (a page always holds at least one record when any follows).
        """

    @abc.abstractmethod
    def counts(self, scenario: str) -> RecordCounts:
        """How many records `scenario` holds, how many were evicted, and its last sequence (0: none), at once."""

    @abc.abstractmethod
    def citing(self, scenario: str, agent_record_id: str) -> list[str]:
        """Ids of the reports of `scenario` that cite `agent_record_id`, in sequence order."""

    @abc.abstractmethod
    def mark_consumed(self, agent_record_ids: Sequence[str], step: int) -> None:
        """Mark records as consumed by learner step `step` (durably)."""

    @abc.abstractmethod
    def enforce_retention(self, max_body_bytes: int) -> int:
        """Evict the oldest bodies until stored bodies total at most `max_body_bytes`; hashes are kept.

        Returns the number of bodies evicted.
        """

    @abc.abstractmethod
    def ensure_scenario(self, name: str, recipe: str) -> tuple[ScenarioInfo, bool]:
        """Create the scenario if absent (unarchiving it if archived); returns (info, created)."""

    @abc.abstractmethod
    def scenario(self, name: str) -> ScenarioInfo | None:
        """The scenario, or None if unknown or archived."""

    @abc.abstractmethod
    def scenarios(self) -> list[ScenarioInfo]:
        """Every live (not archived) scenario, by name."""

    @abc.abstractmethod
    def archive_scenario(self, name: str) -> bool:
        """Archive the scenario (its records are kept); returns False if it was unknown."""

    @abc.abstractmethod
    def control(self, name: str) -> ScenarioControl:
        """How the scenario is set to train (defaults when nothing was set)."""

    @abc.abstractmethod
    def set_control(self, name: str, control: ScenarioControl) -> None:
        """Store the scenario's control durably (replacing what was there)."""

    @abc.abstractmethod
    def rollout(self, name: str) -> RolloutRow:
        """The scenario's rollout row (an empty one when nothing was stored)."""

    @abc.abstractmethod
    def rollouts(self) -> dict[str, RolloutRow]:
        """Every scenario's stored rollout row, by scenario."""

    @abc.abstractmethod
    def set_rollout_mode(self, name: str, mode: str | None) -> None:
        """Store the scenario's rollout mode durably (None: back to the deployment's)."""

    @abc.abstractmethod
    def put_rollout(self, name: str, document: dict[str, Any], expected_version: int) -> bool:
        """Replace the scenario's rollout document iff the row is at `expected_version` (0: no row or no document
        yet); whether it was stored. The version then rises by one."""

    @abc.abstractmethod
    def count_rollout_error(self, rollout_id: str, arm: str) -> None:
        """Count one failed request (5xx, timeout) of `arm` in rollout `rollout_id` (durably, atomically)."""

    @abc.abstractmethod
    def rollout_errors(self, rollout_id: str) -> dict[str, int]:
        """The failed requests counted per arm of rollout `rollout_id`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush and release resources."""
