"""Contracts of the learning layer: Processor, Recipe (with its GatePolicy and Extensions), TrainingBackend,
Evaluator, Selector, Search.

Every hook the learner, the growth step, the gate and the runtime call is declared here, with its default: a recipe,
evaluator or processor overrides what it needs and the pipeline never probes for undeclared attributes or types.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import dataclasses
import math
import statistics
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from reef.core.records import Record
from reef.core.releases import Release
from reef.core.settings import Settings
from reef.core.views import ArchiveView, NextStepView
from reef.inference.base import Engine
from reef.learning.recipe_config import parse_recipe_config
from reef.learning.report import Report
from reef.learning.surface import Surface
from reef.releases.base import CommitLog, ReleaseStore
from reef.storage.base import RecordStore
from reef.training.jobfile import TrainingJob, TrainingResult


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    """Training units a processor has made ready, with the ids of every record they consume.

    `replayed` are earlier samples rehearsal adds to the step (`learning.rehearsal_share`), `rehearsal_passes` times
    over, each pass in its own order: they consume no record, and a weights recipe's job trains every entry once,
    dealt out to its epochs (`TrainingJob.replayed`).
    """

    batch_id: str
    samples: list[dict[str, Any]]
    record_ids: list[str]
    instruction: str | None = None  # an operator's words for this step (POST /reef/train text); recipes may use it
    replayed: list[dict[str, Any]] = dataclasses.field(default_factory=list)


Progress = Callable[[dict[str, Any]], None]
GateFor = Callable[..., Any]  # a scenario's gate tasks, as the agent gate reads them
ReleaseDir = Callable[[str, str | None], Path | None]  # (scenario, release id) -> the release's directory


@dataclasses.dataclass(frozen=True)
class GrowContext:
    """What a recipe may use while growing one candidate.

    `work_dir` is an empty directory owned by this step (deleted after it); write the candidate inside it.
    `progress(event)` reports per-step events (e.g. `{"step": 3, "loss": 1.2}`) to the log and `/reef/status`.
    `backend_factory()` opens the deployment's training backend; `train(job)` runs a job on it (None: this context
    trains nothing, as in a test of a harness recipe).
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

    async def train(self, job: TrainingJob) -> Candidate:
        """Run `job` on the deployment's training backend in a worker thread (the event loop keeps serving while
        the model trains): the trained adapter as the candidate, with the job's metrics."""
        if self.backend_factory is None:
            raise RuntimeError("this growth context has no training backend")
        backend = self.backend_factory()
        result = await asyncio.to_thread(backend.run, job, self.progress)
        return Candidate(Path(result.adapter_path), dict(result.metrics))


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A grown candidate: the directory to publish, the metrics of its growth, and the parts of it that wait for a
    person (`review`, e.g. the executable harness nodes it adds): a candidate with any is published pending review."""

    path: Path
    metrics: dict[str, Any]
    review: tuple[str, ...] = ()


class Processor(abc.ABC):
    """Turns a scenario's records into training batches; pure, fast, no I/O."""

    # How many ready units make a batch (None: `learning.batch_size`); the learner waits for that many.
    units_per_batch: int | None = None
    # Reports (or turns) it could not learn from, by reason, since start (None: it does not count them).
    skipped: collections.Counter[str] | None = None
    # Whether its samples stay valid training data after later steps (demonstrations; not on-policy rollouts), so a
    # share of each batch may be earlier samples replayed (`learning.rehearsal_share`).
    replayable: ClassVar[bool] = False

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

    # Whether it judges on scores (False: it accepts every candidate, so a step needs no gate tasks).
    needs_scores: ClassVar[bool] = True

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


@dataclasses.dataclass(frozen=True)
class GatePolicy:
    """How a recipe's candidates are judged, where not by the deployment's gate (paired tasks, `evaluation.policy`).

    `evaluator(engine)`: the recipe's own gate (a discovery recipe's, which judges nothing); `agent_evaluator(gate_for,
    release_dir)`: a gate that runs the scenario's agent on candidate and serving trees, or None for the chat gate;
    `selector`: the recipe's own selection policy; `takes_instructions`: a requested step with an operator's
    instruction (POST /reef/train text) may run on no ready units; `instruction_policy`: the selection policy of
    such a step (None: the scenario's own).
    """

    evaluator: Callable[[Engine], Evaluator] | None = None
    agent_evaluator: Callable[[GateFor, ReleaseDir], Evaluator | None] | None = None
    selector: Selector | None = None
    takes_instructions: bool = False
    instruction_policy: str | None = None


class Search(abc.ABC):
    """A recipe whose releases carry a search archive (`tttd`): what `GET /reef/scenarios/{s}/archive*` read."""

    @abc.abstractmethod
    def archive_view(self, release_dir: Path, limit: int) -> ArchiveView:
        """The problem, the last step and the top `limit` entries of the archive in `release_dir`."""

    @abc.abstractmethod
    def next_step(self, release_dir: Path, groups: int) -> NextStepView:
        """The next step's `groups` parents, each with its ready-made prompt."""


def _write_nothing(directory: Path) -> None:
    """A new scenario's base release holds no files."""


def _no_feedback_source(scenario: str) -> FeedbackSource | None:
    """Feedback comes as reports."""
    return None


def _no_teacher(releases: ReleaseStore, scenarios: Iterable[str]) -> None:
    """Nothing to check once the stores are open."""


@dataclasses.dataclass(frozen=True)
class Extensions:
    """What only some recipes add, each with a default that does nothing.

    `seed(directory)` writes the content of a new scenario's base release; `feedback_source(scenario)` computes a
    scenario's feedback from its traffic (a judge; None: feedback comes as reports); `check_teacher(releases,
    scenarios)` refuses (BadRequest naming the `recipe_config` key) a configuration that names a release or scenario
    that does not exist, once the stores are open; `search` serves a search archive (None: the recipe keeps none).
    """

    seed: Callable[[Path], None] = _write_nothing
    feedback_source: Callable[[str], FeedbackSource | None] = _no_feedback_source
    check_teacher: Callable[[ReleaseStore, Iterable[str]], None] = _no_teacher
    search: Search | None = None


class Recipe(abc.ABC):
    """How a scenario learns: how its releases serve, what a report holds, how reports become batches and batches
    a candidate, and how candidates are judged.

    An author meets eight members. Four are required: `name`, `surface` (how a release serves: a
    `reef.learning.surface.Surface`), `processor()` and `grow()` (`WeightsRecipe` supplies `grow`: it trains
    `loss_name` on the deployment's training backend). Four have defaults: `config_model` (the typed
    `learning.recipe_config`), `report_model` (the typed report, schema and validation in one), `gate()` (a
    `GatePolicy`) and `extensions()` (`Extensions`). `settings` and `recipe_config` are given to every instance.

    Chosen in YAML (`learning.recipe`) by name (`reef.recipes.<name>`) or `package.module:Class`.
    """

    name: ClassVar[str]
    surface: ClassVar[Surface]
    # The pydantic model `learning.recipe_config` must fit (`extra="forbid"`); None: it is taken as a plain dict.
    config_model: ClassVar[type[BaseModel] | None] = None
    # The report this recipe takes: `POST /reef/report` bodies are validated by it (`parse_report`), and the contract
    # shows its JSON Schema; a `ReportJoiningProcessor` hands each stored report to `join` parsed as it.
    report_model: ClassVar[type[Report]] = Report

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Validated once: BadRequest naming `recipe_config.<key>` for an unknown or ill-typed key.
        self.recipe_config: BaseModel | dict[str, Any] = parse_recipe_config(
            self.config_model, settings.learning.recipe_config
        )

    @abc.abstractmethod
    def processor(self) -> Processor | None:
        """A fresh processor for one scenario; None for a recipe whose surface does not learn."""

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        """Grow a candidate from `batch` under `ctx.work_dir` (a harness tree, a discovery archive, or weights
        through `ctx.train(job)`), continuing from the release in `parent_dir` (None: the base). Every recipe that
        learns implements it (a `WeightsRecipe` inherits it); one whose surface does not learn is never asked."""
        raise NotImplementedError(f"recipe {self.name!r} grows no candidates")

    def gate(self) -> GatePolicy:
        """How this recipe's candidates are judged (the deployment's gate and `evaluation.policy` by default)."""
        return GatePolicy()

    def extensions(self) -> Extensions:
        """What this recipe adds beyond learning from reports (nothing by default)."""
        return Extensions()
