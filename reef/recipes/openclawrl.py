"""`openclawrl`: learn online from usage, with no reports: the next state of each turn is the feedback.

Sessions are rebuilt from the scenario's chat traffic (`reef.judge.sessions`: the `x-reef-tag-session` header, or
a request that resends an earlier turn's messages + answer); a turn's next state is what the user or a tool said
next. A process-reward judge (`reef.judge`; `recipe_config.judge_url` / `judge_model` / `judge_api`, or
`judge_function`) casts `votes` votes per (turn, next state); their plurality is the turn's reward r ∈ {−1, 0, 1},
and a −1 also brings up to `max_hints` hindsight hints. Verdicts are stored as report records citing the turn
(`metadata.judge`, id `judge-<turn id>`), so a step can be audited from `GET /reef/scenarios/{s}/records`.

A turn becomes a unit when its verdict is stored (or a client's report on the same receipt gives it a `score`,
which overrides the judge's vote); `batch_size` units make a batch. The loss
(`reef.training.hindsight`), per turn with completion y:

    L = w_rl · L_clip(ratio_t = π(y_t) / π_recorded(y_t), A = r) + w_opd · Σ_t ι_t · KL(T(·|x ⊕ h, y<t) ‖ S(·|x, y<t))

with T the frozen base (`teacher: self`) shown the hints (`context_template`), the divergence over the student's
top-k (`top_k`, `divergence`), on the turns that have a hint; each term is logged per step (`loss_rl`, `loss_opd`).
A turn whose session expires (`session_ttl_s` idle) before its next state comes is consumed untrained.
Every well-formed report is accepted: one citing no receipt is stored and skipped (`no_references`), one citing a
turn this processor does not hold (trained already, or not a chat turn) `turn_not_held`.
"""

from __future__ import annotations

import collections
import uuid
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from reef.core.errors import BadRequest
from reef.core.payloads import PolicySample
from reef.core.records import Record
from reef.core.settings import Settings
from reef.judge.base import JudgeRequest
from reef.judge.judges import JudgeSettings, open_judge
from reef.judge.sessions import NextState, Sessions, Turn, message_text
from reef.judge.worker import JudgeWorker
from reef.learning.base import Batch, Extensions, FeedbackSource, Processor
from reef.learning.report import Metadata, Report, ReportTaker, read_report
from reef.recipes.distillation import DistillationConfig, DistillationRecipe
from reef.recipes.reports import CitedInference
from reef.recipes.weights import ClipRangeConfig

MAX_HELD_TURNS = 20_000


def session_tag(record: Record) -> str | None:
    """The `session` tag of an inference record (`x-reef-tag-session`), or None."""
    payload = record.payload or {}
    tags = payload.get("tags") or (payload.get("metadata") or {}).get("tags") or {}
    value = tags.get("session") if isinstance(tags, dict) else None
    return value if isinstance(value, str) and value else None


def answer_message(record: Record) -> dict[str, Any] | None:
    """The assistant message of a chat completion record, or None."""
    response = (record.payload or {}).get("response")
    choices = response.get("choices") if isinstance(response, dict) else None
    message = (choices[0] or {}).get("message") if isinstance(choices, list) and choices else None
    if not isinstance(message, dict):
        return None
    kept = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        kept["tool_calls"] = message["tool_calls"]
    return kept


class Verdict(BaseModel):
    """A judge's verdict on one turn, as its record's `metadata.judge` carries it (other keys are kept, unread)."""

    model_config = ConfigDict(extra="allow")

    reward: float = 0.0
    hints: list[Any] = []


class VerdictMetadata(Metadata):
    """The `metadata` an `openclawrl` report may carry: only Reef's judge writes a verdict."""

    judge: Verdict | None = Field(None, description="written by Reef's judge; refused from clients")


class OpenClawRLReport(Report):
    """openclawrl trains from the chat turns themselves, judged by their next state; a report's score on the turn it
    cites overrides the judge's vote (a report citing nothing is stored and skipped: no_references)."""

    metadata: VerdictMetadata | None = Field(None, description="recipe-specific fields")

    def verdict(self) -> Verdict | None:
        """The judge's verdict it carries (a verdict record's), or None (a client's report)."""
        return self.metadata.judge if self.metadata else None

    def check(self, recipe: ReportTaker) -> None:
        if self.verdict() is not None:
            raise BadRequest("metadata.judge is written by Reef's judge, not by clients", field="metadata.judge")

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        schema = cls.model_json_schema()
        schema["properties"]["score"]["description"] = "optional: overrides the judge's vote on the cited turn"
        return schema


class OpenClawRLProcessor(Processor):
    """Turns → sessions → (turn, next state) due for the judge → judged turns as units. Pure: the judge's verdicts
    come back as records, and a fresh processor fed the unconsumed records rebuilds the same state."""

    units_per_batch: int

    def __init__(self, recipe: OpenClawRLRecipe, units_per_batch: int) -> None:
        self.recipe = recipe
        self.units_per_batch = units_per_batch
        self.sessions = Sessions(recipe.session_ttl_s)
        self.skipped: collections.Counter[str] = collections.Counter()
        self._turns: collections.OrderedDict[str, CitedInference] = collections.OrderedDict()
        self._next: dict[str, NextState] = {}  # turn id -> its next state, until judged
        self._verdicts: dict[str, OpenClawRLReport] = {}  # turn id -> the judge's verdict
        self._reports: dict[str, list[OpenClawRLReport]] = collections.defaultdict(list)  # turn id -> clients' reports
        self._ready: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._reserved: dict[str, list[str]] = {}
        self._skipped_ids: list[str] = []

    # ---- ingest ----------------------------------------------------------------------------------------------

    def ingest(self, record: Record) -> None:
        if record.request_type == "inference":
            self._turn(record, train=True)
        elif record.payload is None:
            self._skip([record.agent_record_id], "evicted")
        else:
            self._report(record)

    def observe(self, record: Record) -> None:
        if record.request_type == "inference":
            self._turn(record, train=False)

    def _turn(self, record: Record, train: bool) -> None:
        rollout = CitedInference.from_record(record) if record.payload is not None else None
        answer = answer_message(record) if rollout is not None else None
        if rollout is None or not rollout.messages or answer is None:
            if train:
                self._skip([record.agent_record_id], "not_a_chat_turn")
            return
        turn = Turn(record.agent_record_id, tuple(rollout.messages), answer, record.created_at, session_tag(record))
        found = self.sessions.add(turn)
        if train:
            self._turns[record.agent_record_id] = rollout
            while len(self._turns) > MAX_HELD_TURNS:
                oldest = next(iter(self._turns))
                self._drop(oldest, "too_old")
        if found is not None and found.turn.record_id in self._turns:
            self._next[found.turn.record_id] = found
        for expired in self.sessions.expired():
            if expired.record_id in self._turns and not self._scored(expired.record_id):
                self._drop(expired.record_id, "no_next_state")

    def _report(self, record: Record) -> None:
        report = read_report(OpenClawRLReport, record.agent_record_id, record.payload or {})
        if report is None:  # stored by an older version (or imported as given) in a shape this recipe cannot read
            self._skip([record.agent_record_id], "unreadable_report")
            return
        cited = report.references or []
        if not cited:  # it speaks of no turn: nothing to score
            self._skip([record.agent_record_id], "no_references")
            return
        turn_id = cited[0]
        if turn_id not in self._turns or turn_id in self._reserved_turns():
            # The turn was trained (consumed) already, or is not a chat turn: the report is consumed untrained.
            self._skip([record.agent_record_id], "turn_not_held")
            return
        if report.verdict() is not None:
            self._verdicts[turn_id] = report
        else:
            self._reports[turn_id].append(report)
        if turn_id in self._verdicts or self._scored(turn_id):
            self._ready[turn_id] = None

    def _scored(self, turn_id: str) -> bool:
        return any(r.score is not None for r in self._reports.get(turn_id, ()))

    def _reserved_turns(self) -> set[str]:
        return {i for ids in self._reserved.values() for i in ids}

    def _drop(self, turn_id: str, reason: str) -> None:
        """Consume a turn untrained (with the reports citing it) with the next batch."""
        self._turns.pop(turn_id, None)
        self._next.pop(turn_id, None)
        self._ready.pop(turn_id, None)
        cited = [str(r.agent_record_id) for r in self._reports.pop(turn_id, [])]
        verdict = self._verdicts.pop(turn_id, None)
        self._skip([turn_id, *cited, *([str(verdict.agent_record_id)] if verdict else [])], reason)

    def _skip(self, record_ids: list[str], reason: str) -> None:
        self.skipped[reason] += 1
        self._skipped_ids.extend(record_ids)

    # ---- what the judge must do ------------------------------------------------------------------------------

    def due(self) -> list[JudgeRequest]:
        """The turns whose next state came and that nobody judged or scored yet, oldest first."""
        found = []
        for turn_id, state in self._next.items():
            if turn_id in self._verdicts or self._scored(turn_id) or turn_id not in self._turns:
                continue
            rollout = self._turns[turn_id]
            found.append(
                JudgeRequest(
                    turn_id=turn_id,
                    messages=tuple(rollout.messages or ()),
                    answer=message_text(state.turn.answer),
                    next_state=state.message,
                    next_record_id=state.record_id,
                    session=state.session,
                )
            )
        return found

    def waiting(self) -> dict[str, int]:
        """Turns waiting for their next state, and for the judge."""
        return {"next_state": self.sessions.waiting(), "judge": len(self.due())}

    # ---- batches ---------------------------------------------------------------------------------------------

    def ready(self) -> int:
        return len(self._ready)

    def reward(self, turn_id: str) -> tuple[float, list[str]]:
        """A turn's reward (the newest client score, else the judge's plurality) and its hints."""
        scores = [r.score for r in self._reports.get(turn_id, ()) if r.score is not None]
        verdict = self._verdicts[turn_id].verdict() if turn_id in self._verdicts else None
        judged = verdict or Verdict()
        hints = [h for h in judged.hints if isinstance(h, str)]
        if scores:
            return float(scores[-1]), hints
        return judged.reward, hints

    def build_batch(self, partial: bool = False) -> Batch | None:
        if not self._ready or (len(self._ready) < self.units_per_batch and not partial):
            return None
        chosen = list(self._ready)[: self.units_per_batch]
        samples: list[dict[str, Any]] = []
        record_ids: list[str] = []
        for turn_id in chosen:
            del self._ready[turn_id]
            rollout = self._turns[turn_id]
            reports = [str(r.agent_record_id) for r in self._reports.get(turn_id, ())]
            verdict = self._verdicts.get(turn_id)
            ids = [turn_id, *reports, *([str(verdict.agent_record_id)] if verdict else [])]
            record_ids.extend(ids)
            sample = rollout.policy_sample()
            if sample is None:
                self.skipped["no_training_capture"] += 1
                continue
            reward, hints = self.reward(turn_id)
            samples.append(self.recipe.sample(turn_id, sample, rollout.messages or [], reward, hints))
        record_ids = list(dict.fromkeys(record_ids + self._skipped_ids))
        self._skipped_ids = []
        batch = Batch(f"batch_{uuid.uuid4().hex}", samples, record_ids)
        self._reserved[batch.batch_id] = record_ids
        return batch

    def acknowledge(self, batch_id: str) -> None:
        for record_id in self._reserved.pop(batch_id, []):
            self._turns.pop(record_id, None)
            self._next.pop(record_id, None)
            self._verdicts.pop(record_id, None)
            self._reports.pop(record_id, None)


class OpenClawRLConfig(DistillationConfig, ClipRangeConfig):
    """`learning.recipe_config` of the `openclawrl` recipe: the teacher pass, the loss weights and the judge."""

    context_template: str = Field(
        "\n\n(Hint for your reply: {context})", description="how a hint is written; must hold `{context}`"
    )
    top_k: int = Field(50, ge=0, description="divergence over the student's top-k tokens and a tail (0: all)")
    w_rl: float = Field(1.0, ge=0, description="weight of the policy-gradient term on the judge's rewards")
    w_opd: float = Field(1.0, ge=0, description="weight of the hindsight distillation term")
    session_ttl_s: float = Field(900.0, gt=0, description="seconds after its last turn a session is closed")
    judge_url: str | None = Field(None, description="an OpenAI/Anthropic-compatible judge endpoint (or judge_function)")
    judge_function: str | None = Field(None, description="a Python judge, `package.module:function` (or judge_url)")
    judge_model: str | None = Field(None, description="the model an endpoint judge asks (required with judge_url)")
    judge_api: Literal["openai", "anthropic"] = Field("openai", description="the endpoint judge's API dialect")
    judge_api_key_env: str | None = Field(None, description="environment variable holding the judge's API key")
    votes: int = Field(3, ge=1, description="judge votes per turn")
    max_hints: int = Field(3, ge=1, description="hindsight hints kept per turn")
    judge_timeout_s: float = Field(30.0, gt=0, description="seconds one judge call may take")
    judge_retries: int = Field(2, ge=0, description="retries of a judge call that failed")
    judge_concurrency: int = Field(4, ge=1, description="judge calls in flight at once")
    judge_temperature: float = Field(0.7, ge=0, description="the judge's sampling temperature")
    judge_max_tokens: int = Field(256, ge=1, description="the judge's completion budget per vote")


class OpenClawRLRecipe(DistillationRecipe):
    """Online learning from sessions: a next-state judge's votes as rewards, its hindsight hints distilled."""

    name: ClassVar[str] = "openclawrl"
    loss_name: ClassVar[str] = "openclawrl"
    config_model: ClassVar[type[OpenClawRLConfig]] = OpenClawRLConfig
    report_model: ClassVar[type[Report]] = OpenClawRLReport
    recipe_config: OpenClawRLConfig

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.judge_settings = JudgeSettings.from_config(self.config())
        self.session_ttl_s = self.recipe_config.session_ttl_s
        if self.judge_settings.function:
            open_judge(self.judge_settings)  # refuses a function that cannot be imported, at configuration time

    def sample(
        self, turn_id: str, policy: PolicySample, messages: list[dict[str, Any]], reward: float, hints: list[str]
    ) -> dict[str, Any]:
        """One turn's training sample: its rollout, the reward as advantage, and the hinted teacher prompt (weight 0,
        no distillation, when it has no hint)."""
        sample = {**policy, "advantage": reward, "turn_id": turn_id, "weight": 1.0 if hints else 0.0}
        if hints:
            sample["teacher_messages"] = self.teacher_messages(messages, "; ".join(hints))
        return sample

    def processor(self) -> OpenClawRLProcessor:
        return OpenClawRLProcessor(self, self.settings.learning.batch_size)

    def extensions(self) -> Extensions:
        """A judge computes each turn's reward from its next state."""
        return Extensions(check_teacher=self.check_teacher, feedback_source=self.judge_source)

    def judge_source(self, scenario: str) -> FeedbackSource:
        return JudgeWorker(
            scenario, open_judge(self.judge_settings), self.judge_settings, self.settings.learning.poll_interval_s
        )


RECIPE = OpenClawRLRecipe
