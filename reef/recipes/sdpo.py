"""`sdpo` (self-distillation policy optimization): a grid of attempts teaches itself from its own successes.

A grid is G prompts (`groups`) × R attempts (`rollouts`) sampled from one release; each attempt is reported with
its `score` and `metadata.{step, group, rollout}`. The processor waits for the complete grid of a `step`. A grid
whose attempts were served by more than one release is discarded (a skipped commit says why: its attempts are
not samples of one policy). For each attempt, the teacher's context is the answer of the first *other* attempt of
its group (by `rollout`) whose score ≥ `success_threshold`, plus the report's `feedback` text if any (environment
feedback). With `self_demonstration: true` a successful attempt with no successful sibling is shown its own answer
(so a group's lone success is trained toward, not left out; off by default). An attempt with neither has weight
0: it is left out of the step rather than carried as zeros, so it neither costs a forward pass nor dilutes the
mean below (with SmolLM2 on the demo's tasks about four attempts in five have no successful sibling); a grid where
every attempt has weight 0 is discarded like one that spans releases. The score only selects demonstrations: it
never enters the loss, which is

    L = Σ_{b,t} ι_t · JSD_β(T(· | x ⊕ c_b, y_<t), S(· | x, y_<t)) / Σ_b |y_b|   (b: the attempts with a context)

over the student's top-k tokens plus a tail bucket (β = 0.5, k = 100), with the `ema` teacher (rate ρ = 0.05,
kept in each release under `ema/`). One unit per grid; a batch holds max(1, batch_size // (G·R)) grids.

Every well-formed report is accepted. A report that claims a grid cell (its metadata names `step`, `group` or
`rollout`) must be a whole one — all three, its `score` and its receipt — or it is refused naming the field: a
grid missing a cell never completes. A report that claims none (a plain score, say) is stored and skipped
(`not_a_grid_cell`).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar

from pydantic import Field, StrictInt

from reef.core.errors import BadRequest
from reef.core.payloads import PolicySample
from reef.learning.report import Metadata, Report, ReportTaker, refusing, with_grid_cell
from reef.recipes.distillation import DistillationConfig, DistillationRecipe, Divergence, text_field
from reef.recipes.reports import CitedInference, ReportJoiningProcessor
from reef.recipes.rl import require_score

CELL_KEYS = ("step", "group", "rollout")
GridKey = Annotated[Annotated[str, Field(min_length=1)] | StrictInt, refusing("must be a string or an integer")]


class CellMetadata(Metadata):
    """The `metadata` of an attempt in a grid: its cell."""

    step: GridKey | None = Field(None, description="the grid (all attempts of one step)")
    group: GridKey | None = Field(None, description="the prompt of the grid")
    rollout: Annotated[StrictInt, Field(ge=0), refusing("must be an integer ≥ 0")] | None = Field(
        None, description="the attempt's number within its group"
    )

    def cell(self) -> tuple[str, str, int] | None:
        """`(step, group, rollout)`, or None when it names no whole cell."""
        if self.step is None or self.group is None or self.rollout is None:
            return None
        return str(self.step), str(self.group), self.rollout


class SDPOReport(Report):
    """sdpo trains from complete grids of attempts: reports with a score, the receipt of the attempt and
    metadata.{step, group, rollout}; a report that claims no grid cell is stored and skipped (not_a_grid_cell)."""

    metadata: CellMetadata | None = Field(None, description="recipe-specific fields")

    def check(self, recipe: ReportTaker) -> None:
        """Refuse (BadRequest naming the field) a report that claims a grid cell but is not a whole one."""
        metadata = self.metadata
        if metadata is None or all(metadata.get(key) is None for key in CELL_KEYS):
            return  # not an attempt of a grid: stored, and skipped by the processor (not_a_grid_cell)
        require_score(self)
        for name in CELL_KEYS:
            if metadata.get(name) is None:
                raise BadRequest(f"a grid cell needs metadata.{name}", field=f"metadata.{name}")
        if not self.references:
            raise BadRequest("a grid cell needs the receipt of the attempt", field="references")

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        return with_grid_cell(cls.model_json_schema(), CELL_KEYS, ("score", "references"))


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One reported attempt of a grid."""

    record_ids: list[str]
    rollout: CitedInference
    sample: PolicySample
    score: float
    feedback: str | None


def teacher_context(attempts: list[Attempt], index: int, threshold: float, own: bool = False) -> str | None:
    """The context for `attempts[index]`: the first other successful attempt's answer, then its feedback; or None.

    With `own`, an attempt that succeeded and has no successful sibling is its own demonstration."""
    successes = [i for i, a in enumerate(attempts) if a.score >= threshold and a.rollout.answer]
    others = [i for i in successes if i != index]
    chosen = others[0] if others else (index if own and index in successes else None)
    demonstration = attempts[chosen].rollout.answer if chosen is not None else None
    feedback = attempts[index].feedback
    parts = [demonstration] if demonstration else []
    if feedback:
        parts.append(f"(Feedback on an earlier reply: {feedback})")
    return "\n".join(parts) if parts else None


class SDPOProcessor(ReportJoiningProcessor[SDPOReport]):
    """Collects attempts by grid (`metadata.step`); a complete grid of one release becomes one unit."""

    def __init__(self, units_per_batch: int, recipe: SDPORecipe) -> None:
        super().__init__(units_per_batch, SDPOReport)
        self.recipe = recipe
        config = recipe.recipe_config
        self.groups, self.rollouts = config.groups, config.rollouts
        self.threshold = config.success_threshold
        self.own = config.self_demonstration
        self._grids: dict[str, dict[tuple[str, int], Attempt]] = {}
        self._discarded: list[tuple[str, list[str]]] = []

    def join(self, report: SDPOReport, rollouts: list[CitedInference]) -> None:
        record_ids = self.record_ids(report, rollouts)
        cell, score = report.metadata.cell() if report.metadata else None, report.score
        if cell is None:
            self.skip(record_ids, "not_a_grid_cell")
            return
        if score is None:
            self.skip(record_ids, "no_score")
            return
        sample = rollouts[0].policy_sample() if rollouts else None
        if sample is None or not rollouts[0].messages:
            self.skip(record_ids, "no_training_capture" if rollouts else "no_references")
            return
        step, group, rollout = cell
        attempt = Attempt(record_ids, rollouts[0], sample, score, text_field(report.feedback))
        grid = self._grids.setdefault(step, {})
        grid[(group, rollout)] = attempt
        if len(grid) >= self.groups * self.rollouts:
            del self._grids[step]
            self._complete(step, grid)

    def _complete(self, step: str, grid: dict[tuple[str, int], Attempt]) -> None:
        record_ids = [i for attempt in grid.values() for i in attempt.record_ids]
        releases = sorted({str(a.rollout.release_id) for a in grid.values()})
        if len(releases) > 1:
            reason = f"sdpo grid {step!r} spans releases {', '.join(releases)}: its attempts are not one policy's"
            self.skipped["grid_spans_releases"] += 1
            self._discarded.append((reason, record_ids))
            return
        samples = []
        for group in dict.fromkeys(group for group, _ in grid):
            attempts = [grid[key] for key in sorted(k for k in grid if k[0] == group)]
            for index, attempt in enumerate(attempts):
                context = teacher_context(attempts, index, self.threshold, self.own)
                if context is not None:
                    teacher = self.recipe.teacher_messages(attempt.rollout.messages or [], context)
                    samples.append({**attempt.sample, "teacher_messages": teacher, "weight": 1.0})
        if not samples:
            reason = f"sdpo grid {step!r} has no attempt with a successful sibling or feedback: nothing to learn"
            self.skipped["grid_without_context"] += 1
            self._discarded.append((reason, record_ids))
            return
        self.add_unit(record_ids, samples)

    def discarded(self) -> list[tuple[str, list[str]]]:
        """Grids dropped since the last call, as (reason, record ids): the learner commits each as skipped."""
        found, self._discarded = self._discarded, []
        return found

    def waiting_grids(self) -> int:
        """Grids still short of G × R attempts."""
        return len(self._grids)


class SDPOConfig(DistillationConfig):
    """`learning.recipe_config` of the `sdpo` recipe."""

    teacher: str = Field("ema", description="the teacher (see `sdft`); by default an EMA of the student's adapter")
    divergence: Divergence = Field("jsd", description="the per-token divergence between student and teacher")
    context_template: str = Field(
        "\n\nA correct reply is:\n{context}", description="how the context block is written; must hold `{context}`"
    )
    top_k: int = Field(100, ge=0, description="divergence over the student's top-k tokens and a tail (0: all)")
    groups: int = Field(4, ge=1, description="prompts in a grid")
    rollouts: int = Field(4, ge=1, description="attempts per prompt in a grid")
    success_threshold: float = Field(0.5, description="the score at or above which an attempt is a success")
    self_demonstration: bool = Field(False, description="show a lone success its own answer as the demonstration")


class SDPORecipe(DistillationRecipe):
    """Self-distillation from successful sibling attempts in grids of prompts × attempts."""

    name: ClassVar[str] = "sdpo"
    loss_name: ClassVar[str] = "sdpo"
    config_model: ClassVar[type[SDPOConfig]] = SDPOConfig
    report_model: ClassVar[type[Report]] = SDPOReport
    recipe_config: SDPOConfig

    def processor(self) -> SDPOProcessor:
        grid = self.recipe_config.groups * self.recipe_config.rollouts
        return SDPOProcessor(max(1, self.settings.learning.batch_size // grid), self)


RECIPE = SDPORecipe
