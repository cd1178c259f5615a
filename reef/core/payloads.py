"""Named shapes of the data that crosses modules and processes as JSON: the token capture an engine records with an
inference, the record payload of an inference, a policy sample a recipe hands the training job, the paired scores of
a commit's metrics, and a learner's status.

They are TypedDicts, not classes, because each is stored or sent as JSON as it is (a record payload, a job file,
`/reef/status`); the names say what a reader holds and mypy checks the keys.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class TrainingCapture(TypedDict):
    """What the local engine records with an inference for learning (`payload.training`), never sent to a client:
    the ids as the model saw and produced them (end of sequence included), each completion token's log-prob at
    temperature 1, and the precision of the matmuls that computed them."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float]
    precision: NotRequired[str | None]


class Timing(TypedDict):
    """When an inference started (epoch seconds) and how long it took."""

    started_at: float
    duration_s: float


class InferencePayload(TypedDict):
    """The payload of an inference record: the request as forwarded, the answer, and what learning needs."""

    dialect: str
    request: dict[str, Any]
    response: dict[str, Any]
    release_id: str | None
    tags: dict[str, str]
    complete: bool
    stream: bool
    usage: dict[str, Any] | None
    timing: Timing
    training: NotRequired[TrainingCapture]
    error: NotRequired[str]
    rollout_id: NotRequired[str]  # the rollout that chose the serving release (its arm: `release_id`)


class PolicySample(TypedDict):
    """One recorded rollout as the training job reads it: prompt and completion ids and the recorded log-probs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    old_logprobs: list[float]
    rollout_precision: NotRequired[str]  # what computed `old_logprobs` (the engine's matmuls)


class PairedSummary(TypedDict):
    """The paired scores in a commit's metrics and status: task count and, when paired, both means, wins, losses."""

    tasks: int
    candidate_mean: NotRequired[float]
    current_mean: NotRequired[float]
    wins: NotRequired[int]
    losses: NotRequired[int]


class RetentionSummary(PairedSummary):
    """The retention guard in a commit's metrics (`retention`): the paired scores on the retention set, the loss
    (`regression`, current − candidate mean), its standard error, the allowed `max_regression`, and the verdict."""

    regression: float
    standard_error: float
    max_regression: float
    refused: bool


class ControlState(TypedDict):
    """A scenario's training control as the API shows it."""

    training_mode: str
    paused: bool
    requested: dict[str, Any] | None  # the requested step (with `state`: queued or running), if any


class LearnerStatus(ControlState):
    """One scenario's learner in `/reef/status`."""

    mode: str
    step: int
    ready: int
    batch_size: int
    records_seen: int
    records_considered: int  # the last record sequence the learner loop has decided on (trained, buffered or skipped)
    job: dict[str, Any]
    recent_losses: list[Any]
    last_commit: dict[str, Any] | None
    blocked: str | None
    gate: dict[str, Any]
    lineage: dict[str, str | None]
    consecutive_failures: int
    errors: list[Any]
    skipped: dict[str, int]  # reports (or turns) it could not learn from, by reason
    computed_feedback: NotRequired[dict[str, Any]]
