"""A scenario's working lineage: the candidates that did not lose, each trained from the one before.

A step trains from the lineage's tip when there is one, else from the serving release. A candidate that ties its
gate (not accepted, not lost) becomes the new tip, stored in the release repository unserved and unlisted
(`ReleaseStore.keep_lineage`); one that loses ends the lineage, and so does one that is published. A tip belongs
to the serving release it grew beside (`Release.lineage_base`): once the head moves (a publish, a rollback, a
promote) it is stale and dropped. The commit log is the truth: each judged step records the tip after it
(`metrics.lineage`), and a resume trusts only the tip the last one names (a tip kept by a step that crashed before
its commit is rolled forward by `recovery`).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from reef.core.releases import Release
from reef.releases.base import ReleaseStore

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class StepParents:
    """A step's two parents: the serving release it is judged against and the release it was trained from."""

    head: Release | None
    trained_from: Release | None


NO_PARENTS = StepParents(None, None)


class WorkingLineage:
    """The tip of one scenario's lineage (blocking calls: run them in a worker thread)."""

    def __init__(self, scenario: str, releases: ReleaseStore) -> None:
        self.scenario = scenario
        self.releases = releases
        self.tip_id: str | None = None  # the tip the commit log vouches for

    def parents(self, head: Release | None) -> StepParents:
        """What the next step is judged against (`head`) and trains from (the live tip, else `head`)."""
        tip = self.releases.lineage(self.scenario)
        if tip is None:
            return StepParents(head, head)
        if head is not None and tip.release_id == self.tip_id and tip.lineage_base == head.release_id:
            return StepParents(head, tip)
        log.info("lineage %s: dropping the stale tip %s", self.scenario, tip.release_id)
        self.end()
        return StepParents(head, head)

    def keep(
        self,
        candidate: Path,
        parents: StepParents,
        step: int,
        recipe: str,
        metrics: dict[str, Any],
        record_ids: list[str],
    ) -> Release:
        """Store `candidate` as the new tip (not yet vouched for: the step's commit does that)."""
        assert parents.head is not None and parents.trained_from is not None
        tip = self.releases.keep_lineage(
            self.scenario,
            candidate,
            parents.trained_from.release_id,
            step=step,
            recipe=recipe,
            metrics=metrics,
            # As for a publish: the consumed ids ride along so a crash before the commit log rolls forward.
            lineage_base=parents.head.release_id,
            consumed_record_ids=record_ids,
        )
        self.tip_id = tip.release_id
        return tip

    def end(self) -> None:
        """Forget the lineage; the next step trains from the serving release."""
        self.tip_id = None
        self.releases.drop_lineage(self.scenario)
