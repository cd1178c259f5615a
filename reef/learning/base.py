"""Contracts of the learning layer: Processor, Recipe, TrainingBackend, Evaluator, Selector.

Every hook the learner, the growth step, the gate and the runtime call is declared here, with its default: a recipe,
evaluator or processor overrides what it needs and the pipeline never probes for undeclared attributes.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import math
import statistics
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from reef.core.capabilities import Capability
from reef.core.records import Record
from reef.core.releases import Release
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.learning.recipe_config import parse_recipe_config
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore
from reef.training.jobfile import TrainingJob, TrainingResult

Surface = Literal["weights", "harness", "none"]
ServingPrompt = tuple[str | None, tuple[tuple[str, str], ...]]  # (system prompt, worked example turns)


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """Training units a processor has made ready, with the ids of every record they consume."""

    batch_id: str
    samples: list[dict[str, Any]]
    record_ids: list[str]
    instruction: str | None = None  # an operator's words for this step (POST /reef/train text); recipes may use it


Progress = Callable[[dict[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class GrowContext:
    """What a recipe may use while growing one candidate.

    `work_dir` is an empty directory owned by this step (deleted after it); write the candidate inside it.
    `progress(event)` reports per-step events (e.g. `{"step": 3, "loss": 1.2}`) to the log and `/reef/status`.
    `backend_factory()` opens the deployment's training backend, for a recipe whose own `grow` trains weights.
    `releases` lets a recipe read other releases (a distillation teacher); None where a caller has no store.
    `commits` is the scenario's step log (a harness method reads its rejection ledger); None where there is none.
    """

    scenario: str
    step: int
    work_dir: Path
    settings: Settings
    engine: Engine
    records: RecordStore
    current_release: Release | None
    progress: Progress
    backend_factory: Callable[[], TrainingBackend] | None = None
    releases: ReleaseStore | None = None
    commits: CommitLog | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A grown candidate: the directory to publish and the metrics of its growth."""

    path: Path
    metrics: dict[str, Any]


class Processor(abc.ABC):
    """Turns a scenario's records into training batches; pure, fast, no I/O."""

    # How many ready units make a batch (None: `learning.batch_size`); the learner waits for that many.
    units_per_batch: int | None = None
    # Reports (or turns) it could not learn from, by reason, since start (None: it does not count them).
    skipped: collections.Counter[str] | None = None

    def skipped_counts(self) -> dict[str, int]:
        """How many reports (or turns) it could not learn from, by reason (`no_training_capture`, …), since start;
        `/reef/status` shows them per scenario so that a path that cannot learn is never silent."""
        counts = self.skipped
        return {str(reason): int(n) for reason, n in sorted(counts.items())} if counts else {}

    @abc.abstractmethod
    def ingest(self, record: Record) -> None:
        """Take one record (inference or report) in sequence order."""

    @abc.abstractmethod
    def ready(self) -> int:
        """How many training units are buffered and usable."""

    def wanted(self) -> list[str]:
        """Ids of records a waiting report cites that this processor does not hold (evicted, or not seen yet):
        the learner reads them back and ingests them."""
        return []

    def hold_out(self, every: int, rollouts: bool = True) -> None:  # noqa: B027 - optional hook
        """Keep about one in `every` reports that carry a known answer out of training, as gate tasks (0: none);
        with `rollouts`, also scored reports on a captured rollout, for the ranking gate (the engine can score).

        Which ones is decided by each report's id alone, so the split is the same after a restart."""

    def gate_tasks(self) -> list[dict[str, Any]]:
        """The held-out reports as gate task rows (`{"id", "messages", "checker", "answer", …}`), oldest first."""
        return []

    def held_out_rule(self) -> str | None:
        """Which reports `hold_out` can make gate tasks of, in words for the learner's status (e.g. "reports with
        metadata.demonstration that cite a chat request"); None when it holds none out (then the gate needs tasks
        of the scenario's own)."""
        return None

    def observe(self, record: Record) -> None:  # noqa: B027 - optional hook
        """See a record that a committed step already consumed, as history only (a session's earlier turn): it is
        never trained on again."""

    def due(self) -> list[Any]:
        """Work a `FeedbackSource` must do before more units become ready (turns waiting for a judge), oldest first."""
        return []

    @abc.abstractmethod
    def build_batch(self, partial: bool = False) -> Batch | None:
        """Take a batch of ready units (None if not enough; with `partial`, whatever is ready, None only if nothing
        is); it stays reserved until acknowledged."""

    @abc.abstractmethod
    def acknowledge(self, batch_id: str) -> None:
        """Forget a batch once its step is committed."""

    def discarded(self) -> list[tuple[str, list[str]]]:
        """Units dropped since the last call, as (reason, record ids), so a step can record why they were skipped;
        each is returned once."""
        return []


class FeedbackSource(abc.ABC):
    """Feedback Reef computes from traffic beside a scenario's learner (a judge): its verdicts become records."""

    @abc.abstractmethod
    async def run(self, due: Callable[[], list[Any]], deliver: Callable[[list[Record]], Awaitable[None]]) -> None:
        """Forever: take what `due()` lists (the processor's waiting work), hand the records it makes to `deliver`."""

    @abc.abstractmethod
    def blocker(self) -> str | None:
        """Why learning must wait now (the judge does not answer), or None."""

    @abc.abstractmethod
    def status(self) -> dict[str, Any]:
        """What `/reef/status` shows of it."""

    def meter(self, on_usage: Callable[[Any], None]) -> None:  # noqa: B027 - only an endpoint judge spends tokens
        """Hand each upstream answer's `usage` to `on_usage` (the learner's upstream budget counts it)."""


class TrainingBackend(abc.ABC):
    """Runs one training job outside the server process (`local` subprocess or `ray` task)."""

    @abc.abstractmethod
    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        """Run `job` to completion (blocking; call from a worker thread); `progress(dict)` gets per-step events."""


class Evaluator(abc.ABC):
    """Scores a release (or candidate) on a scenario's held-out tasks."""

    # Whether it scores the scenario's gate tasks (then the learner waits while there are too few of them).
    uses_gate_tasks: ClassVar[bool] = False
    # Whether it runs the agent on the candidate tree itself (then the serving prompt is not prepended to its calls).
    runs_agent: ClassVar[bool] = False

    @abc.abstractmethod
    async def paired_scores(
        self, scenario: str, candidate_path: Path | None, current_release_id: str | None
    ) -> tuple[list[float], list[float]]:
        """(candidate scores, current scores): same tasks, same sampling, interleaved."""

    def details(self, scenario: str) -> dict[str, Any] | None:
        """What the last `paired_scores` of `scenario` saw beyond the scores (per-task episodes), for the commit
        metrics; None by default."""
        return None

    def blocker(self) -> str | None:
        """Why this evaluator cannot judge at all now (e.g. it runs untrusted code and no sandbox may start), or
        None; the learner then starts no step and consumes nothing."""
        return None


class Selector(abc.ABC):
    """Decides whether a candidate replaces the serving release."""

    @abc.abstractmethod
    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        """(accepted, human-readable reason)."""

    def lost(self, candidate: Sequence[float], current: Sequence[float]) -> bool:
        """Whether a candidate that was not accepted did worse than the current release (then it is dropped; one
        that did not lose stays the tip of the working lineage). By default: its paired differences average more
        than one standard error below zero — a difference within the gate's own noise is a tie."""
        return significantly_worse(candidate, current)


def significantly_worse(candidate: Sequence[float], current: Sequence[float]) -> bool:
    """mean(d) < −se(d) for the paired differences d = candidate − current (any d < 0 when there is only one);
    unpaired or empty vectors count as worse."""
    if not candidate or len(candidate) != len(current):
        return True
    mean, error = paired_mean_and_error(candidate, current)
    # The tolerance keeps an exact one-standard-error loss (one task of n lost, none won) a tie despite rounding.
    return mean < -error - 1e-9


def paired_mean_and_error(candidate: Sequence[float], current: Sequence[float]) -> tuple[float, float]:
    """The mean of the paired differences d = candidate − current and its standard error se(d) = sd(d)/√n (0 for
    a single pair); the vectors must be paired and non-empty."""
    differences = [c - k for c, k in zip(candidate, current, strict=True)]
    mean = statistics.fmean(differences)
    if len(differences) == 1:
        return mean, 0.0
    return mean, statistics.stdev(differences, mean) / math.sqrt(len(differences))


class Recipe(abc.ABC):
    """How a scenario learns: surface, report schema, processor, growth, and evaluation policy.

    Chosen in YAML (`learning.recipe`) by name (`reef.recipes.<name>`) or `package.module:Class`.
    """

    name: ClassVar[str]
    surface: ClassVar[Surface]
    # Whether a requested step with an instruction (POST /reef/train text) can run on no ready units.
    takes_instructions: ClassVar[bool] = False
    # The selection policy of a step that carries an instruction (None: the scenario's own policy).
    instruction_policy: ClassVar[str | None] = None
    # The pydantic model `learning.recipe_config` must fit (`extra="forbid"`); None: it is taken as a plain dict.
    config_model: ClassVar[type[BaseModel] | None] = None
    # The training job's loss (a built-in name or `package.module:function`); None: the recipe's name.
    loss_name: ClassVar[str | None] = None
    # What this recipe needs from the serving engine; `reef serve` refuses an engine that cannot supply it.
    needs: ClassVar[frozenset[Capability]] = frozenset()

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Validated once: BadRequest naming `recipe_config.<key>` for an unknown or ill-typed key.
        self.recipe_config: BaseModel | dict[str, Any] = parse_recipe_config(
            self.config_model, settings.learning.recipe_config
        )

    def validate_report(self, report: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Raise BadRequest naming the field if a field this recipe reads is malformed (a demonstration that is not
        text, a grid cell that is not whole). A report that merely lacks what the recipe trains from is well-formed:
        it is stored, and the processor skips it, counting the reason (`skipped_counts`)."""

    def report_schema(self) -> dict[str, Any]:
        """The JSON Schema of a report this recipe takes (as `validate_report` checks it), with what it trains from
        as its `description`."""
        from reef.learning.report_schema import REPORT_SCHEMA

        return REPORT_SCHEMA

    def serving_prompt(self, release_dir: Path) -> ServingPrompt:
        """What a plain chat agent is served from a release of this recipe: its system prompt and worked examples
        as earlier turns (nothing by default; harness recipes render their tree)."""
        return None, ()

    def seed(self, directory: Path) -> None:  # noqa: B027 - optional hook
        """Write the content of a new scenario's base release into `directory` (nothing by default)."""

    @abc.abstractmethod
    def processor(self) -> Processor | None:
        """A fresh processor for one scenario; None for recipes that do not learn."""

    def feedback_source(self, scenario: str) -> FeedbackSource | None:
        """What computes this scenario's feedback from its traffic (a judge); None: feedback comes as reports."""
        return None

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate | None:
        """Grow a candidate itself (a harness tree, a discovery archive) under `ctx.work_dir`; None (the default):
        the step runs `training_job` on the deployment's training backend instead."""
        return None

    def training_job(
        self, batch: Batch, base_model_path: Path, parent_adapter_path: Path | None, output_dir: Path
    ) -> TrainingJob:
        """The job that grows a candidate from `batch`, continuing from the serving release's adapter if any: the
        deployment's `training` settings and this recipe's configuration travel with it, typed."""
        return TrainingJob(
            base_model_path=base_model_path,
            parent_adapter_path=parent_adapter_path,
            samples=batch.samples,
            loss=self.loss_name or self.name,
            training=self.settings.training,
            recipe_config=self.recipe_config,
            output_dir=output_dir,
        )

    def prepare_job(self, job: TrainingJob, ctx: GrowContext) -> TrainingJob:
        """`job` completed with inputs only a step can resolve (a teacher release's directory); runs in a worker
        thread; the job as is by default."""
        return job

    def evaluator(self, engine: Engine) -> Evaluator | None:
        """The recipe's own gate (a discovery recipe's none); None: the deployment's."""
        return None

    def agent_evaluator(
        self, gate_for: Callable[..., Any], release_dir: Callable[[str, str | None], Path | None]
    ) -> Evaluator | None:
        """A gate that runs the scenario's agent on candidate and serving trees (a harness recipe whose adapter has an
        agent Reef can run); None: the chat gate."""
        return None

    def selector(self) -> Selector | None:
        """The recipe's own selection policy; None: `evaluation.policy`."""
        return None

    def check_teacher(self, releases: ReleaseStore, scenarios: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """Refuse (BadRequest naming the `recipe_config` key) a configuration that names a release or scenario that
        does not exist, once the stores are open; nothing by default."""
