"""The `ReleaseStore` and `CommitLog` contracts."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reef.core.releases import Commit, Release, ReleaseOperation


class ReleaseStore(abc.ABC):
    """A per-scenario chain of releases; the head is what serves."""

    @abc.abstractmethod
    def head(self, scenario: str) -> Release | None:
        """The serving release of `scenario`, or None if it has none."""

    def head_ids(self, scenarios: Sequence[str]) -> dict[str, str | None]:
        """The serving release id of each of `scenarios` (None: none); stores that can answer in one look do."""
        return {scenario: getattr(self.head(scenario), "release_id", None) for scenario in scenarios}

    @abc.abstractmethod
    def get(self, scenario: str, release_id: str) -> Release:
        """The release, pending ones included; raises NotFound."""

    @abc.abstractmethod
    def list(self, scenario: str) -> list[Release]:
        """Every release of `scenario` (pending ones included), newest first."""

    @abc.abstractmethod
    def publish(
        self,
        scenario: str,
        content: Path,
        parent_release_id: str | None,
        *,
        operation: ReleaseOperation = "training",
        step: int = 0,
        recipe: str = "",
        metrics: dict[str, Any] | None = None,
        pending: bool = False,
        consumed_record_ids: Sequence[str] | None = None,
        trained_from: str | None = None,
    ) -> Release:
        """Commit the directory `content` as a new release; moves the head by compare-and-swap.

        Raises `Conflict` if the head is not `parent_release_id`. A pending release does not move the head. A
        learner step's release carries the records it consumed and the release it was trained from.
        """

    @abc.abstractmethod
    def republish(self, scenario: str, release_id: str, operation: ReleaseOperation) -> Release:
        """Publish the content of an earlier (or pending) release again as a new head (rollback/promote)."""

    @abc.abstractmethod
    def materialize(self, release: Release) -> Path:
        """A read-only local directory holding the release's files (cached)."""

    @abc.abstractmethod
    def keep_lineage(
        self,
        scenario: str,
        content: Path,
        parent_release_id: str,
        *,
        step: int,
        recipe: str = "",
        metrics: dict[str, Any] | None = None,
        lineage_base: str,
        consumed_record_ids: Sequence[str],
    ) -> Release:
        """Store a candidate that did not lose as the tip of the scenario's working lineage (unserved, unlisted);
        it replaces the previous tip. `parent_release_id` is the release it was trained from, `lineage_base` the
        serving release it grew beside, `consumed_record_ids` what its step consumed."""

    def archive(self, scenario: str) -> str | None:
        """Set a deleted scenario's releases aside under an archive name (returned); None: nothing was kept."""
        return None

    @abc.abstractmethod
    def lineage(self, scenario: str) -> Release | None:
        """The tip of the scenario's working lineage, or None."""

    @abc.abstractmethod
    def drop_lineage(self, scenario: str) -> None:
        """Forget the working lineage (nothing happens if there is none)."""


class CommitLog(abc.ABC):
    """Append-only, fsync'd log of learner steps per scenario; an append is the commit point of a step."""

    @abc.abstractmethod
    def append(self, commit: Commit) -> None:
        """Durably append one step."""

    @abc.abstractmethod
    def list(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[Commit]:
        """Steps of `scenario` with step > `after_step`, ascending; with `record_id`, only those that consumed it."""

    @abc.abstractmethod
    def last(self, scenario: str) -> Commit | None:
        """The latest step of `scenario`, or None."""
