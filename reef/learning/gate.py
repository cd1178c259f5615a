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
from reef.core.releases import Release
from reef.core.settings import Settings
from reef.learning.base import Processor
from reef.learning.evaluation.ranking import RankedRollout, ranking_pairs
from reef.learning.evaluation.retention import RetentionSet, retention_set
from reef.learning.evaluation.task_store import TaskStore
from reef.learning.evaluation.tasks import GateTasks, Task, load_tasks, parse_task

log = logging.getLogger(__name__)

MAX_RANKED_ROLLOUTS = 256  # the newest held-out scored rollouts the ranking gate pairs up


class GateSources:
    """The explicit task sources of every scenario (the API's task store and the `evaluation.tasks` file)."""

    def __init__(self, settings: Settings, store: TaskStore | None = None) -> None:
        self.settings = settings
        self.store = store or TaskStore(Path(settings.storage.dir).expanduser() / "tasks")
        self._from_file: dict[str, tuple[tuple[int, int] | None, list[Task]]] = {}  # scenario -> (file stat, tasks)

    def explicit(self, scenario: str) -> GateTasks:
        """The API's and the file's tasks of `scenario` (source `none` when there are none)."""
        given = self.store.tasks(scenario)
        from_file = self._file_tasks(scenario)
        names = [name for name, tasks in (("api", given), ("file", from_file)) if tasks]
        return GateTasks("+".join(names) or "none", given + from_file)

    def _file_tasks(self, scenario: str) -> list[Task]:
        """`evaluation.tasks` for `scenario`, read again only when the file changes (an operator may edit it)."""
        path = self.settings.evaluation.tasks
        if path is None:
            return []
        path = Path(path).expanduser()
        if path.is_dir():
            path = path / f"{scenario}.jsonl"
        try:
            stat = path.stat()
            signature: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            signature = None
        cached = self._from_file.get(scenario)
        if cached is None or cached[0] != signature:
            cached = (signature, load_tasks(self.settings.evaluation.tasks, scenario))
            self._from_file[scenario] = cached
        return list(cached[1])

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
        self._gate = GateTasks("none", [])

    def update(self, rows: list[dict[str, Any]]) -> GateTasks:
        if len(rows) == self._rows_seen:
            return self._gate
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
        rankings = self._rankings[-MAX_RANKED_ROLLOUTS:]
        gate = GateTasks("held_out", list(self._tasks), rankings, ranking_pairs(rankings))
        self._gate = gate if gate.size() else GateTasks("none", [])
        return self._gate


class ScenarioGate:
    """One scenario's gate: what it judges on now, and why its learner must wait when that is not enough."""

    def __init__(self, scenario: str, sources: GateSources, uses_tasks: bool, always_accepts: bool) -> None:
        self.scenario = scenario
        self.sources = sources
        self.uses_tasks = uses_tasks  # False: a recipe's own evaluator, which needs no tasks from here
        self.always_accepts = always_accepts
        self._held_out = HeldOutTasks()
        self._serving_since: float | None = None

    def holdout_every(self) -> int:
        """The held-out split a fresh processor should keep (0 when the scenario has tasks of its own)."""
        return self.sources.held_out_every(self.scenario) if self.uses_tasks else 0

    def restarted(self) -> None:
        """A fresh processor replaced the old one: parse its held-out rows from the start."""
        self._held_out = HeldOutTasks()

    def tasks(self, processor: Processor | None) -> GateTasks:
        """The scenario's own tasks (API, file), else its processor's held-out split."""
        explicit = self.sources.explicit(self.scenario)
        if explicit.tasks or processor is None:
            return explicit
        return self._held_out.update(processor.gate_tasks())

    def serving(self, release: Release | None) -> None:
        """The serving release the retention set is drawn against (the learner sets it on resume and each step)."""
        self._serving_since = release.created_at if release is not None else None

    def retention(self, processor: Processor | None) -> RetentionSet:
        """The retention set the gate judges a candidate on besides its tasks: its items (held out, or posted through
        the API) from before the serving release was published (empty with `evaluation.retention_items` 0, or for a
        policy that needs no scores)."""
        limit = self.sources.settings.evaluation.retention_items
        if not self.uses_tasks or self.always_accepts:
            return RetentionSet(limit=limit)
        return retention_set(self.tasks(processor).tasks, self._serving_since, limit)

    def blocker(self, processor: Processor | None) -> str | None:
        """Why no candidate could be judged now (too little to judge on, for a policy that needs scores), or None."""
        if not self.uses_tasks or self.always_accepts:
            return None
        return self._blocker_for(self.tasks(processor), processor)

    def _blocker_for(self, gate: GateTasks, processor: Processor | None) -> str | None:
        """What the learner waits for, saying exactly what would give the gate tasks: the scenario's own, or the
        reports its recipe holds out (only those its processor can turn into gate tasks)."""
        if self.always_accepts:
            return None
        every = self.sources.settings.evaluation.holdout_every
        rule = processor.held_out_rule() if processor is not None else None
        where = f"post them to /reef/scenarios/{self.scenario}/tasks or set evaluation.tasks"
        if not every:
            split = f"{where} (evaluation.holdout_every is 0: no report is held out)"
        elif rule is None:
            split = f"{where} (this recipe holds no report out for the gate)"
        else:
            split = (
                f"post them to /reef/scenarios/{self.scenario}/tasks, set evaluation.tasks, or send {rule} "
                f"(about one in {every} is held out for the gate)"
            )
        if not gate.size():
            return f"no gate tasks for scenario {self.scenario!r}: {split}; not training"
        minimum = self.sources.settings.evaluation.holdout_min_tasks
        if gate.source == "held_out" and gate.size() < minimum:
            return (
                f"the held-out split of scenario {self.scenario!r} gives fewer than {minimum} paired scores "
                f"(evaluation.holdout_min_tasks); waiting for more {rule or 'held-out reports'} (about one in {every} "
                "is held out)"
            )
        return None

    def status(self, processor: Processor | None) -> dict[str, Any]:
        """`/reef/status`'s `gate`: source, size, how a task is scored, the split's settings, why the learner waits,
        if it does, and the retention set (against the serving release of the last resume or step)."""
        if not self.uses_tasks:
            return {"source": "evaluator", "tasks": None}
        gate = self.tasks(processor)  # once: it reads the scenario's own tasks
        own = gate.source not in ("held_out", "none")
        return {
            **gate.to_json(),
            "scoring": self.sources.settings.evaluation.scoring,
            "holdout_every": 0 if own else self.sources.settings.evaluation.holdout_every,
            "holdout_min_tasks": self.sources.settings.evaluation.holdout_min_tasks,
            "waiting": self._blocker_for(gate, processor),
            "retention": {
                **self.retention(processor).to_json(),
                "max_regression": self.sources.settings.evaluation.max_regression,
            },
        }
