"""The `tttd` processor: one step's G × R grid of scored attempts, joined with the rollouts they cite.

A report names its cell in `metadata.{step, group, rollout, parent_id}` and carries the attempt
(`metadata.solution`, the extracted solution text or null; `metadata.valid`; `metadata.details`, the evaluator's
words) with the evaluator's `score`. The processor waits until every cell of a step has arrived, then emits one unit:

- an `{"attempt": …}` row per cell, for the archive (every attempt is a visit, trained on or not),
- a policy sample (recorded tokens and log-probs, plus `advantage`) per attempt of each group whose rewards vary.

A group is not trained on when its rewards are all equal (`skipped["constant_group"]`) or when the grid's
rollouts were served by more than one release (`skipped["mixed_releases"]`: the recorded log-probs would not
belong to one policy). A second report for a filled cell is skipped (`duplicate_cell`), and so is a report that
names no cell of the grid (`not_a_grid_cell`: a plain score, say; the server accepts it) or a valid attempt without
a score (`no_score`, only from an imported record: the server refuses a claimed cell without one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, StrictInt

from reef.core.payloads import PolicySample
from reef.core.records import Record
from reef.learning.report import Metadata, Report, refusing
from reef.recipes.reports import CitedInference, ReportJoiningProcessor

Advantages = Callable[[list[float]], list[float] | None]
Reward = Callable[[float | None, bool], float]

CELL_KEYS = ("step", "group", "rollout", "parent_id")  # a report whose metadata names any of them claims a cell
Index = Annotated[StrictInt, Field(ge=0), refusing("must be a non-negative integer")]


class GridMetadata(Metadata):
    """The `metadata` of an attempt: its cell in a step's grid, and the attempt as the evaluator judged it."""

    step: Annotated[StrictInt, Field(ge=1), refusing("must be a positive integer")] | None = Field(
        None, description="the search step"
    )
    group: Index | None = Field(None, description="the parent's row of the grid")
    rollout: Index | None = Field(None, description="the attempt's column of the grid")
    parent_id: Annotated[str, Field(min_length=1), refusing("must name the archive entry the attempt improves on")] | (
        None
    ) = Field(None, description="the archive entry the attempt improves on")
    solution: str | None = Field(None, description="the extracted solution text (null: none could be extracted)")
    valid: bool | None = Field(None, description="whether the evaluator found the solution valid")
    details: Any = Field(None, description="the evaluator's words")


class GridReport(Report):
    """An attempt of a grid (the discovery recipe's report model adds the checks its grid's bounds decide)."""

    metadata: GridMetadata | None = Field(None, description="recipe-specific fields")

    def claims_cell(self) -> bool:
        """Whether its metadata names any of the cell keys (then it must be a whole cell)."""
        return self.metadata is not None and any(self.metadata.get(key) is not None for key in CELL_KEYS)


@dataclasses.dataclass(frozen=True, slots=True)
class Cell:
    """One filled cell of a step's grid."""

    record_ids: list[str]
    sample: PolicySample | None
    reward: float
    attempt: dict[str, Any]
    release_id: str | None


class GridProcessor(ReportJoiningProcessor[GridReport]):
    """Collects a step's grid of attempts; a complete grid becomes one unit (a batch is one grid)."""

    def __init__(self, groups: int, rollouts: int, advantages: Advantages, reward: Reward) -> None:
        super().__init__(1, GridReport)
        self.groups, self.rollouts = groups, rollouts
        self.advantages = advantages
        self.reward = reward
        self._grids: dict[int, dict[tuple[int, int], Cell]] = {}
        self._release_of: dict[str, str | None] = {}

    def ingest(self, record: Record) -> None:
        if record.request_type == "inference":
            self._release_of[record.agent_record_id] = record.release_id()
        super().ingest(record)

    def join(self, report: GridReport, rollouts: list[CitedInference]) -> None:
        meta = report.metadata
        record_ids = self.record_ids(report, rollouts)
        found = self.cell_of(meta)
        if meta is None or found is None:
            self.skip(record_ids, "not_a_grid_cell")
            return
        step, cell = found
        solution = meta.solution
        valid = (meta.valid if meta.valid is not None else solution is not None) and solution is not None
        score = report.score if valid else None
        if valid and score is None:
            self.skip(record_ids, "no_score")
            return
        grid = self._grids.setdefault(step, {})
        if cell in grid:
            self.skip(record_ids, "duplicate_cell")
            return
        reward = self.reward(score, valid)
        attempt = {
            "step": step,
            "group": cell[0],
            "rollout": cell[1],
            "parent_id": str(meta.parent_id),
            "solution": solution,
            "score": score,
            "reward": reward,
            "valid": valid,
            "details": str(meta.get("details", ""))[-400:],
        }
        sample = rollouts[0].policy_sample() if len(rollouts) == 1 else None
        release = self._release_of.pop(rollouts[0].record_id, None) if rollouts else None
        grid[cell] = Cell(record_ids, sample, reward, attempt, release)
        if len(grid) == self.groups * self.rollouts:
            del self._grids[step]
            self._emit(grid)

    def cell_of(self, meta: GridMetadata | None) -> tuple[int, tuple[int, int]] | None:
        """`(step, (group, rollout))` of a report's metadata, or None when it names no cell of this grid."""
        if meta is None or not meta.parent_id or meta.step is None or meta.group is None or meta.rollout is None:
            return None
        step, group, rollout = meta.step, meta.group, meta.rollout
        if step < 1 or not 0 <= group < self.groups or not 0 <= rollout < self.rollouts:
            return None
        return step, (group, rollout)

    def _emit(self, grid: dict[tuple[int, int], Cell]) -> None:
        mixed = len({cell.release_id for cell in grid.values()}) > 1
        rows: list[dict[str, Any]] = [{"attempt": grid[key].attempt} for key in sorted(grid)]
        for group in range(self.groups):
            cells = [grid[(group, rollout)] for rollout in range(self.rollouts)]
            advantages = None if mixed else self.advantages([cell.reward for cell in cells])
            if advantages is None:
                self.skipped["mixed_releases" if mixed else "constant_group"] += 1
                continue
            for cell, advantage in zip(cells, advantages, strict=True):
                if cell.sample is None:
                    self.skipped["no_training_capture"] += 1
                else:
                    rows.append({**cell.sample, "advantage": advantage})
        self.add_unit([i for key in sorted(grid) for i in grid[key].record_ids], rows)

    def waiting_cells(self) -> dict[int, int]:
        """Cells filled so far of each step still incomplete."""
        return {step: len(grid) for step, grid in self._grids.items()}
