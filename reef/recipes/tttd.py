"""`tttd`: discovery by test-time training (TTT-Discover). The model searches one problem and learns from its attempts.

Config (`learning.recipe_config`): `problem` (built-in name, `package.module` or directory; `problem_options`),
the grid `groups` × `rollouts` (G × R, default 4 × 4), `train` (false: the archive grows, the weights do not — the
frozen control), the archive's `max_entries` / `exploration`, the loss's `kl_coef` (0.1) / `clip_low` / `clip_high`.

A step (see `reef.discovery.search`): a client takes the next step's G parents and prompts from
`GET /reef/scenarios/{s}/archive/next?groups=G`, asks each prompt R times through `/v1/*` (recorded like any
inference), evaluates each answer in the sandbox (`reef.discovery.evaluation`) and reports it (`score`,
`references`, `metadata.{step, group, rollout, parent_id, solution, valid, details}`). When the grid is complete
(`reef.recipes.tttd_grid`) the learner grows a candidate: the parent release's archive with the step folded in,
and, from the groups whose rewards vary, a LoRA adapter trained with the entropic leave-one-out advantage
(`reef.recipes.entropic`) by the importance-weighted policy gradient on the recorded log-probs plus kl_coef · KL to
the base model (the `rl` loss). The archive rides in the release (`archive.json`): pending with the candidate,
committed when it publishes, so a crash before the publish leaves the archive as the last release committed it
and the unconsumed grid is replayed on resume. Every candidate is published (the archive is the search's state;
there is no held-out gate to judge a search step against).
"""

from __future__ import annotations

import asyncio
import math
import shutil
from pathlib import Path
from typing import Any, ClassVar, cast

from pydantic import Field

from reef.core.errors import BadRequest
from reef.core.views import ArchiveView, NextStepView
from reef.discovery.archive import Archive, Attempt
from reef.discovery.problem import Problem, ProblemError, load_problem, parses
from reef.discovery.search import ARCHIVE_FILE, entry_view, next_step, read_archive, seed_archive, write_archive
from reef.learning.base import Batch, Candidate, Evaluator, Extensions, GatePolicy, Search
from reef.learning.evaluation.selectors import Always
from reef.learning.growth import GrowContext
from reef.learning.report import Report, ReportTaker, narrowed, with_grid_cell
from reef.learning.surface import Surface
from reef.recipes.entropic import entropic_advantages
from reef.recipes.rl import require_score
from reef.recipes.tttd_grid import CELL_KEYS, Advantages, GridProcessor, GridReport
from reef.recipes.weights import ON_POLICY_WEIGHTS, PolicyGradientConfig, WeightsRecipe
from reef.sandbox import Limits, isolation


class NoGate(Evaluator):
    """A search step is not judged on tasks: its archive is the search's state and is always kept."""

    async def paired_scores(
        self, scenario: str, candidate_path: Path | None, current_release_id: str | None
    ) -> tuple[list[float], list[float]]:
        return [], []


class TTTDConfig(PolicyGradientConfig):
    """`learning.recipe_config` of the discovery recipes (`tttd`, `tttd-mean`, `guidance_ttt`)."""

    problem: str = Field(
        "circle-packing", min_length=1, description="the problem: a built-in name, `package.module` or a directory"
    )
    problem_options: dict[str, Any] = Field(default_factory=dict, description="options the problem module takes")
    groups: int = Field(4, ge=1, description="parents per step (the grid's rows)")
    rollouts: int = Field(4, ge=1, description="attempts per parent (the grid's columns)")
    train: bool = Field(True, description="train the adapter on each grid (false: search the archive only)")
    max_entries: int = Field(64, ge=1, description="entries the archive keeps")
    exploration: float = Field(1.0, ge=0, description="the PUCT exploration constant of parent selection")
    kl_coef: float = Field(0.1, ge=0, description="weight of the KL penalty to the base model (0: none)")
    eval_cpu_s: int = Field(10, gt=0, description="CPU seconds one sandboxed evaluation may use")
    eval_memory_mb: int = Field(1024, gt=0, description="memory one sandboxed evaluation may use, in MiB")
    eval_wall_s: float = Field(20.0, gt=0, description="wall-clock seconds one sandboxed evaluation may take")


class TTTDReport(GridReport):
    """A discovery recipe learns from complete grids of attempts: reports with a score and metadata.{step, group,
    rollout, parent_id} (the attempt's receipt for the weights); a report that claims no grid cell is stored and
    skipped (not_a_grid_cell)."""

    def check(self, recipe: ReportTaker) -> None:
        cast("TTTDRecipe", recipe).check_report(self)

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        return cast("TTTDRecipe", recipe).grid_schema(cls.model_json_schema())


class TTTDRecipe(WeightsRecipe, Search):
    """Test-time training on a discovery problem with entropic leave-one-out advantages."""

    surface: ClassVar[Surface] = ON_POLICY_WEIGHTS  # learns from its recorded rollouts

    name: ClassVar[str] = "tttd"
    loss_name: ClassVar[str] = "rl"
    config_model: ClassVar[type[TTTDConfig]] = TTTDConfig
    report_model: ClassVar[type[Report]] = TTTDReport
    recipe_config: TTTDConfig
    _problem: Problem | None = None

    def advantages(self) -> Advantages:
        return entropic_advantages

    def problem(self) -> Problem:
        """The configured problem; BadRequest naming `learning.recipe_config.problem` when it cannot be loaded."""
        if self._problem is not None:  # settings are immutable: load (and read the evaluator's source) once
            return self._problem
        config = self.recipe_config
        try:
            problem = load_problem(config.problem, dict(config.problem_options))
        except ProblemError as error:
            raise BadRequest(str(error), field="learning.recipe_config.problem") from error
        self._problem = problem
        return problem

    def sandbox(self) -> bool | None:
        """How evaluations run: None (bubblewrap or a refusal); with `sandbox.allow_unsandboxed`, unsandboxed
        where bubblewrap cannot start."""
        return isolation().available if self.settings.sandbox.allow_unsandboxed else None

    def limits(self) -> Limits:
        config = self.recipe_config
        return Limits(config.eval_cpu_s, config.eval_memory_mb << 20, config.eval_wall_s)

    # ---- reports ---------------------------------------------------------------------------------------------

    def check_report(self, report: GridReport) -> None:
        """Refuse (BadRequest naming the field) a report that claims a grid cell but is not a whole one of this grid."""
        meta = report.metadata
        if meta is None or not report.claims_cell():
            return  # not an attempt of the grid: stored, and skipped by the processor (not_a_grid_cell)
        require_score(report)
        config = self.recipe_config
        bounds = {"step": math.inf, "group": config.groups, "rollout": config.rollouts}
        for key, bound in bounds.items():
            value = meta.get(key)
            if value is None:
                raise BadRequest(
                    f"must be a {'positive' if key == 'step' else 'non-negative'} integer", field=f"metadata.{key}"
                )
            if value >= bound:
                raise BadRequest(f"no grid cell {key} {value}: the grid has {bound} {key}s", field=f"metadata.{key}")
        if not meta.parent_id:
            raise BadRequest("must name the archive entry the attempt improves on", field="metadata.parent_id")
        if meta.solution is not None:
            problem = self.problem()
            if not parses(meta.solution, problem.solution_format):
                raise BadRequest(f"is not a valid {problem.solution_format} solution", field="metadata.solution")

    def grid_schema(self, base: dict[str, Any]) -> dict[str, Any]:
        """`base` with this grid's cell bounds."""
        config = self.recipe_config
        cell = {
            "group": {"maximum": config.groups - 1},
            "rollout": {"maximum": config.rollouts - 1},
        }
        return with_grid_cell(narrowed(base, metadata=cell), CELL_KEYS, ("score",))

    def processor(self) -> GridProcessor:
        config, problem = self.recipe_config, self.problem()
        return GridProcessor(config.groups, config.rollouts, self.advantages(), problem.reward)

    def gate(self) -> GatePolicy:
        """No gate: every search step is kept."""
        return GatePolicy(evaluator=lambda engine: NoGate(), selector=Always())

    def extensions(self) -> Extensions:
        """The base release holds the seeded archive; the archive routes read it."""
        return Extensions(seed=self.seed, search=self)

    # ---- the archive -----------------------------------------------------------------------------------------

    def seed(self, directory: Path) -> None:
        config = self.recipe_config
        archive = seed_archive(
            self.problem(),
            self.limits(),
            sandbox=self.sandbox(),
            max_entries=config.max_entries,
            exploration=config.exploration,
        )
        write_archive(archive, directory)

    def archive_of(self, release_dir: Path) -> Archive:
        """The archive a release carries (the seeds, evaluated now, for a release from before this recipe)."""
        found = read_archive(release_dir)
        if found is not None:
            return found
        return seed_archive(
            self.problem(), self.limits(), sandbox=self.sandbox(), max_entries=self.recipe_config.max_entries
        )

    def archive_view(self, release_dir: Path, limit: int) -> ArchiveView:
        """`GET /reef/scenarios/{s}/archive`: the problem, the last step and the top `limit` entries."""
        archive, problem = self.archive_of(release_dir), self.problem()
        return {
            "problem": problem.name,
            "direction": problem.direction,
            "step": archive.step,
            "total_visits": archive.total_visits,
            "size": len(archive.entries),
            "best_known": problem.best_known,
            "best_known_source": problem.best_known_source,
            "entries": [entry_view(e) for e in archive.top(limit)],
        }

    def next_step(self, release_dir: Path, groups: int) -> NextStepView:
        """`GET /reef/scenarios/{s}/archive/next?groups=G`: the next step's parents and prompts."""
        if groups != self.recipe_config.groups:
            raise BadRequest(f"this scenario's grid has {self.recipe_config.groups} groups", field="groups")
        step = next_step(self.archive_of(release_dir), self.problem(), groups)
        return {
            "problem": step["problem"],
            "step": step["step"],
            "answer": step["answer"],
            "response_format": step["response_format"],
            "parents": step["parents"],
            "rollouts": self.recipe_config.rollouts,
        }

    # ---- growing ---------------------------------------------------------------------------------------------

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        """The parent's archive with the grid folded in, and (with `train`) the adapter trained on the grid."""
        archive = await asyncio.to_thread(self.archive_of, parent_dir) if parent_dir else None
        if archive is None:
            archive = await asyncio.to_thread(seed_archive, self.problem(), self.limits(), sandbox=self.sandbox())
        rows = [s["attempt"] for s in batch.samples if "attempt" in s]
        samples = [s for s in batch.samples if "attempt" not in s]
        candidate = ctx.work_dir / "candidate"
        metrics: dict[str, Any] = {"trained_samples": len(samples)}
        if samples and self.recipe_config.train and ctx.backend_factory is not None:
            trained = await super().grow(Batch(batch.batch_id, samples, batch.record_ids), parent_dir, ctx)
            candidate = trained.path
            metrics.update(trained.metrics)
        elif parent_dir is not None:  # nothing trained: the weights stay the parent's
            shutil.copytree(parent_dir, candidate, ignore=shutil.ignore_patterns(ARCHIVE_FILE, ".git"))
        for step in sorted({int(r["step"]) for r in rows}):
            attempts = [_attempt(r) for r in rows if int(r["step"]) == step]
            archive.record(step, attempts)
        write_archive(archive, candidate)
        best = archive.best()
        valid = [r for r in rows if r["valid"]]
        metrics.update(
            discovery_step=archive.step,
            best_score=best.score,
            step_best_score=max((r["score"] for r in valid), default=None, key=_or_nan),
            step_mean_reward=sum(r["reward"] for r in rows) / len(rows) if rows else None,
            valid_fraction=len(valid) / len(rows) if rows else None,
        )
        return Candidate(candidate, metrics)


def _attempt(row: dict[str, Any]) -> Attempt:
    return Attempt(
        row["parent_id"],
        row["group"],
        row["rollout"],
        row["solution"],
        row["score"],
        row["reward"],
        row["valid"],
        row["details"],
    )


def _or_nan(value: float | None) -> float:
    return -math.inf if value is None else value


RECIPE = TTTDRecipe
