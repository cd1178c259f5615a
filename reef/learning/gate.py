"""Where a scenario's gate finds its tasks: given through the API, in the `evaluation.tasks` file, or — when it
has neither — a held-out split of its own feedback (reports with a known answer; see `evaluation.holdout`).

A scenario never publishes on no evidence: with no tasks (or fewer held-out ones than
`evaluation.holdout_min_tasks`), its learner waits and says why.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.evaluation.ranking import RankedRollout
from reef.learning.evaluation.task_store import TaskStore
from reef.learning.evaluation.tasks import GateTasks, Task, load_tasks, parse_task

log = logging.getLogger(__name__)


class GateSources:
    """The explicit task sources of every scenario (the API's task store and the `evaluation.tasks` file)."""

    def __init__(self, settings: Settings, store: TaskStore | None = None) -> None:
        self.settings = settings
        self.store = store or TaskStore(Path(settings.storage.dir).expanduser() / "tasks")

    def explicit(self, scenario: str) -> GateTasks:
        """The API's and the file's tasks of `scenario` (source `none` when there are none)."""
        given = self.store.tasks(scenario)
        from_file = load_tasks(self.settings.evaluation.tasks, scenario)
        names = [name for name, tasks in (("api", given), ("file", from_file)) if tasks]
        return GateTasks("+".join(names) or "none", given + from_file)

    def held_out_every(self, scenario: str) -> int:
        """How sparsely a processor holds reports out for the gate: 0 when the scenario has tasks of its own."""
        return 0 if self.explicit(scenario).tasks else self.settings.evaluation.holdout_every


class HeldOutTasks:
    """Parses the held-out rows a processor collected, once each (a row that does not parse is left out): tasks
    with a known answer, and scored rollouts (`"checker": "ranking"`) for the ranking gate."""

    def __init__(self) -> None:
        self._rows_seen = 0
        self._tasks: list[Task] = []
        self._rankings: list[RankedRollout] = []

    def update(self, rows: list[dict[str, Any]]) -> GateTasks:
        if len(rows) < self._rows_seen:  # a fresh processor: parse again from the start
            self._rows_seen, self._tasks, self._rankings = 0, [], []
        for row in rows[self._rows_seen :]:
            try:
                if row.get("checker") == "ranking":
                    self._rankings.append(RankedRollout.from_row(row))
                else:
                    self._tasks.append(parse_task(dict(row), f"held-out report {row.get('id')}"))
            except BadRequest as exc:
                log.warning("a held-out report is not usable by the gate: %s", exc)
        self._rows_seen = len(rows)
        gate = GateTasks("held_out", list(self._tasks), list(self._rankings))
        return gate if gate.size() else GateTasks("none", [])
