"""From records to harness training units: each report that cites inferences becomes one trace per citation.

A trace is a JSON-able dict: `messages` (the request's conversation), `answer` (the model's text), `score`,
`feedback` (string or object, opaque), `expected` (a correct answer when the report names one) and `record_ids`.
A report arrives parsed as the recipe's report model (`read_report`); one stored in a shape the model does not
take today is skipped (`unreadable_report`). A report that cites nothing and carries no `feedback` gives no trace: it
is counted as skipped (`no_references`) and consumed with the next batch.
"""

from __future__ import annotations

import collections
import re
import uuid
from typing import Any

from reef.core.records import Record
from reef.learning.base import Batch, Processor
from reef.learning.report import Report, read_report

MAX_REMEMBERED_INFERENCES = 2_000
_EXPECTED_KEYS = ("expected", "answer", "correct_answer", "demonstration", "reference")  # a correct answer's names
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "and",
        "or",
        "is",
        "are",
        "in",
        "on",
        "for",
        "with",
        "what",
        "how",
        "reply",
        "answer",
        "only",
    ]
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and (len(w) > 1 or w.isdigit())}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


class TraceProcessor(Processor):
    """Pairs reports with the inferences they cite; a batch is `batch_size` traces."""

    def __init__(self, batch_size: int = 8, report_model: type[Report] = Report) -> None:
        self.batch_size = batch_size
        self.report_model = report_model
        self.skipped: collections.Counter[str] = collections.Counter()
        self._skipped_ids: list[str] = []
        self._inferences: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._ready: list[dict[str, Any]] = []
        self._reserved: dict[str, list[dict[str, Any]]] = {}
        self._waiting: dict[str, list[tuple[Report, str]]] = {}  # inference id -> (report, report id)

    def ingest(self, record: Record) -> None:
        payload = record.payload or {}
        if record.request_type == "inference":
            self._inferences[record.agent_record_id] = payload
            self._inferences.move_to_end(record.agent_record_id)
            while len(self._inferences) > MAX_REMEMBERED_INFERENCES:
                self._inferences.popitem(last=False)
            # Reports that cited it before it was (read back and) seen: their traces are ready now.
            for waiting, report_id in self._waiting.pop(record.agent_record_id, []):
                self._ready.append(trace_of(payload, waiting, [record.agent_record_id, report_id]))
            return
        report = read_report(self.report_model, record.agent_record_id, payload)
        if report is None:  # stored by an older version (or imported as given) in a shape the recipe cannot read
            self.skipped["unreadable_report"] += 1
            self._skipped_ids.append(record.agent_record_id)
            return
        references = report.references or []
        for ref in references:
            inference = self._inferences.get(ref)
            if inference is not None:
                self._ready.append(trace_of(inference, report, [ref, record.agent_record_id]))
            else:  # older than the window kept here (or not seen yet): the learner reads it back by id
                self._waiting.setdefault(ref, []).append((report, record.agent_record_id))
        if not references and report.feedback is not None:
            self._ready.append(trace_of({}, report, [record.agent_record_id]))
        elif not references:  # a score about nothing it can show a method: nothing to learn from
            self.skipped["no_references"] += 1
            self._skipped_ids.append(record.agent_record_id)

    def wanted(self) -> list[str]:
        return list(self._waiting)

    def ready(self) -> int:
        return len(self._ready)

    def build_batch(self, partial: bool = False) -> Batch | None:
        if not self._ready or (len(self._ready) < self.batch_size and not partial):
            return None
        samples, self._ready = self._ready[: self.batch_size], self._ready[self.batch_size :]
        batch_id = "batch_" + uuid.uuid4().hex[:12]
        self._reserved[batch_id] = samples
        record_ids = sorted({rid for sample in samples for rid in sample["record_ids"]} | set(self._skipped_ids))
        self._skipped_ids = []
        return Batch(batch_id=batch_id, samples=samples, record_ids=record_ids)

    def acknowledge(self, batch_id: str) -> None:
        self._reserved.pop(batch_id, None)


def trace_of(inference: dict[str, Any], report: Report, record_ids: list[str]) -> dict[str, Any]:
    """One trace from an inference payload and the report that judged it."""
    request = inference.get("request") or {}
    feedback = report.feedback
    metadata = report.metadata.model_dump() if report.metadata else {}
    return {
        "messages": _messages(request),
        "answer": answer_of(inference.get("response") or {}),
        "score": report.score,
        "feedback": feedback,
        "expected": _expected(feedback, metadata),
        "record_ids": record_ids,
    }


def question_of(trace: dict[str, Any]) -> str:
    """The last user turn of a trace (what the agent was asked)."""
    for message in reversed(trace.get("messages") or []):
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def is_failure(trace: dict[str, Any], threshold: float = 0.5) -> bool:
    """A trace whose score is below `threshold` (or, unscored, whose feedback names a correct answer)."""
    score = trace.get("score")
    if isinstance(score, int | float):
        return score < threshold
    return trace.get("expected") is not None


def answer_of(response: dict[str, Any]) -> str:
    """The assistant text of a chat / messages / responses body."""
    if "choices" in response:
        message = (response.get("choices") or [{}])[0].get("message") or {}
        return _text(message.get("content"))
    if isinstance(response.get("content"), list):
        return _text(response["content"])
    if "output" in response:
        parts = [_text(item.get("content")) for item in response.get("output") or [] if isinstance(item, dict)]
        return "".join(parts)
    return ""


def _messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(request.get("messages"), list):
        out = []
        if isinstance(request.get("system"), str | list):
            out.append({"role": "system", "content": _text(request["system"])})
        out += [
            {"role": m.get("role", "user"), "content": _text(m.get("content"))}
            for m in request["messages"]
            if isinstance(m, dict)
        ]
        return out
    if isinstance(request.get("input"), str):
        return [{"role": "user", "content": request["input"]}]
    return []


def _expected(feedback: Any, metadata: dict[str, Any]) -> str | None:
    for source in (metadata, feedback if isinstance(feedback, dict) else {}):
        for key in _EXPECTED_KEYS:
            value = source.get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
                return str(value).strip()
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
