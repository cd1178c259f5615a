"""Joining feedback reports with the inference records they cite: the shared part of the weight recipes' processors.

Records arrive in sequence order. Inference records are remembered as `CitedInference`s (their captured token ids,
or their chat messages). A report record is read as the recipe's report model (`read_report`: the model `POST
/reef/report` validated it with; a stored report that does not fit it today is skipped, `unreadable_report`); once
all its cited records have been seen, the parsed report is handed to the recipe's `join`, which turns it into a
training `Unit` (or skips it, with a reason). A report citing a record not seen yet waits.
State is derived only from the records ingested, so a fresh processor fed the unconsumed records after a
restart rebuilds the same units.

With a held-out split (`hold_out`), a report whose id falls in the split and that `gate_task` can turn into a gate
task (it carries a known answer) becomes one instead of a unit: it is never trained on and never consumed, so a
restart rebuilds the same gate tasks from the same unconsumed records.

Only the newest `MAX_HELD_ROLLOUTS` inference records are held (a busy proxy records far more inferences than
anyone reports on); a report citing an older one asks for it (`wanted`), and the learner reads it back by id.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import uuid
from typing import Any, Generic

from reef.core.payloads import PolicySample
from reef.core.records import Record
from reef.learning.base import Batch, Processor
from reef.learning.evaluation.holdout import is_held_out
from reef.learning.evaluation.retention import retention_fields
from reef.learning.report import ReportT, read_report

MAX_HELD_ROLLOUTS = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class CitedInference:
    """What a processor keeps of one inference record a report may cite (its prompt, answer and token capture)."""

    record_id: str
    prompt_ids: list[int] | None
    completion_ids: list[int] | None
    logprobs: list[float] | None
    messages: list[dict[str, Any]] | None
    tools: Any
    tags: dict[str, Any]
    release_id: str | None = None  # the release that served it
    answer: str | None = None  # the assistant's text (chat dialect), for recipes that show it to a teacher
    precision: str | None = None  # the dtype of the matmuls that computed `logprobs` (local engine)

    @classmethod
    def from_record(cls, record: Record) -> CitedInference:
        payload = record.payload or {}
        training = payload.get("training") or {}
        request = payload.get("request") or {}
        # The job renders messages with the chat template, which expects chat-dialect (OpenAI) messages.
        chat = payload.get("dialect") in (None, "chat") and isinstance(request.get("messages"), list)
        tags = payload.get("tags") or (payload.get("metadata") or {}).get("tags") or {}
        return cls(
            record_id=record.agent_record_id,
            prompt_ids=training.get("prompt_token_ids"),
            completion_ids=training.get("completion_token_ids"),
            logprobs=training.get("logprobs"),
            messages=request.get("messages") if chat else None,
            tools=request.get("tools") if chat else None,
            tags=dict(tags),
            release_id=record.release_id(),
            answer=_answer_text(payload.get("response")) if chat else None,
            precision=training.get("precision"),
        )

    def policy_sample(self) -> PolicySample | None:
        """Prompt, completion and recorded log-probs, or None when the record has no usable token capture."""
        if not self.prompt_ids or not self.completion_ids or self.logprobs is None:
            return None
        if len(self.logprobs) != len(self.completion_ids):
            return None
        sample = PolicySample(
            prompt_ids=self.prompt_ids, completion_ids=self.completion_ids, old_logprobs=self.logprobs
        )
        if self.precision:
            sample["rollout_precision"] = self.precision  # what computed `old_logprobs` (the engine's matmuls)
        return sample

    def prompt(self) -> dict[str, Any] | None:
        """The prompt as token ids when captured, else as chat messages; None when neither is available."""
        if self.prompt_ids:
            return {"prompt_ids": self.prompt_ids}
        if self.messages:
            return {"messages": self.messages, **({"tools": self.tools} if self.tools else {})}
        return None


def _answer_text(response: Any) -> str | None:
    """The first choice's message text of a chat completion, or None."""
    choices = response.get("choices") if isinstance(response, dict) else None
    message = (choices[0] or {}).get("message") if isinstance(choices, list) and choices else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


@dataclasses.dataclass(frozen=True, slots=True)
class Unit:
    """One training unit: its samples and every record it consumes."""

    record_ids: tuple[str, ...]
    samples: tuple[dict[str, Any], ...]


class ReportJoiningProcessor(Processor, Generic[ReportT]):
    """Buffers units made by `join`; a batch takes `units_per_batch` of them plus the ids of skipped reports.

    A subclass implements `join` (and, for the held-out gate, `gate_task`); both receive the report as
    `report_model` (the recipe's), its `agent_record_id` the record's.
    """

    units_per_batch: int

    def __init__(self, units_per_batch: int, report_model: type[ReportT]) -> None:
        self.units_per_batch = units_per_batch
        self.report_model = report_model
        self.skipped: collections.Counter[str] = collections.Counter()
        self._rollouts: collections.OrderedDict[str, CitedInference] = collections.OrderedDict()
        self._pending: dict[str, tuple[int, ReportT]] = {}  # report id -> (sequence, report)
        self._waiting_on: dict[str, set[str]] = collections.defaultdict(set)  # inference id -> report ids
        self._units: list[Unit] = []
        self._reserved: dict[str, list[str]] = {}
        self._skipped_ids: list[str] = []
        self._held_ids: set[str] = set()  # report ids in pending, units or reserved batches: ingest is idempotent
        self._holdout_every = 0
        self._hold_rollouts = True
        self._gate_rows: list[dict[str, Any]] = []
        self._arrived_at: dict[str, float] = {}  # a pending report's record time: its held-out row keeps it

    @abc.abstractmethod
    def join(self, report: ReportT, rollouts: list[CitedInference]) -> None:
        """Turn a report and its cited rollouts into units (`add_unit`) or drop it (`skip`)."""

    def gate_task(self, report: ReportT, rollouts: list[CitedInference]) -> dict[str, Any] | None:
        """A held-out report as a gate task row (`{"id", "messages", "checker", "answer", "max_tokens"}`; checkers:
        `exact`, `f1`, `ranking`, …), or None when it carries no known answer (then it is trained on). A processor
        that returns rows gets the held-out gate: reports in the `evaluation.holdout_every` split are never trained on
        and the gate scores candidate and serving release on them."""
        return None

    def hold_out(self, every: int, rollouts: bool = True) -> None:
        self._holdout_every = max(0, int(every))
        self._hold_rollouts = rollouts

    def gate_tasks(self) -> list[dict[str, Any]]:
        return list(self._gate_rows)

    @property
    def holds_rollouts(self) -> bool:
        """Whether scored rollouts may be held out for the ranking gate (the engine scores given tokens)."""
        return self._hold_rollouts

    def ingest(self, record: Record) -> None:
        if record.request_type == "inference":
            if record.payload is not None:
                self._rollouts[record.agent_record_id] = CitedInference.from_record(record)
                self._rollouts.move_to_end(record.agent_record_id)
                while len(self._rollouts) > MAX_HELD_ROLLOUTS:
                    self._rollouts.popitem(last=False)
            waiting = [self._pending[r] for r in self._waiting_on.pop(record.agent_record_id, ())]
            for _, waiting_report in sorted(waiting, key=lambda pending: pending[0]):
                if waiting_report.agent_record_id in self._pending:
                    self._try_join(waiting_report)
            return
        if record.agent_record_id in self._held_ids:
            return
        self._held_ids.add(record.agent_record_id)
        if record.payload is None:  # body evicted by retention: nothing to learn from
            self.skip([record.agent_record_id], "evicted")
            return
        report = read_report(self.report_model, record.agent_record_id, record.payload)
        if report is None:  # stored by an older version (or imported as given) in a shape this recipe cannot read
            self.skip([record.agent_record_id], "unreadable_report")
            return
        self._pending[record.agent_record_id] = (record.sequence or 0, report)
        self._arrived_at[record.agent_record_id] = record.created_at
        self._try_join(report)

    def _try_join(self, report: ReportT) -> None:
        assert report.agent_record_id is not None  # `read_report` sets it
        references = list(report.references or [])
        missing = [r for r in references if r not in self._rollouts]
        for record_id in missing:
            self._waiting_on[record_id].add(report.agent_record_id)
        if missing:
            return
        del self._pending[report.agent_record_id]
        arrived_at = self._arrived_at.pop(report.agent_record_id, None)
        rollouts = [self._rollouts[r] for r in references]
        if is_held_out(report.agent_record_id, self._holdout_every):
            row = self.gate_task(report, rollouts)
            if row is not None and (self._hold_rollouts or row.get("checker") != "ranking"):
                self._gate_rows.append({**row, **retention_fields(report, arrived_at)})
                return
        self.join(report, rollouts)

    @staticmethod
    def record_ids(report: ReportT, rollouts: list[CitedInference]) -> list[str]:
        """The ids a unit made of `report` and its cited rollouts consumes."""
        return [str(report.agent_record_id), *(r.record_id for r in rollouts)]

    def add_unit(self, record_ids: list[str], samples: list[dict[str, Any]]) -> None:
        self._units.append(Unit(tuple(record_ids), tuple(samples)))

    def skip(self, record_ids: list[str], reason: str) -> None:
        """Drop a report that cannot be learned from; its records are consumed with the next batch."""
        self.skipped[reason] += 1
        self._skipped_ids.extend(record_ids)

    def ready(self) -> int:
        return len(self._units)

    def pending(self) -> int:
        """Reports waiting for a cited record this processor has not seen."""
        return len(self._pending)

    def wanted(self) -> list[str]:
        return list(self._waiting_on)

    def build_batch(self, partial: bool = False) -> Batch | None:
        if not self._units or (len(self._units) < self.units_per_batch and not partial):
            return None
        units, self._units = self._units[: self.units_per_batch], self._units[self.units_per_batch :]
        record_ids = list(dict.fromkeys([i for u in units for i in u.record_ids] + self._skipped_ids))
        self._skipped_ids = []
        batch = Batch(f"batch_{uuid.uuid4().hex}", [dict(s) for u in units for s in u.samples], record_ids)
        self._reserved[batch.batch_id] = record_ids
        return batch

    def acknowledge(self, batch_id: str) -> None:
        for record_id in self._reserved.pop(batch_id, []):
            self._rollouts.pop(record_id, None)
            self._held_ids.discard(record_id)
