"""The durable record of one interaction (inference) or one feedback report."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import uuid
from typing import Any, Literal

import orjson

from reef.core.errors import BadRequest

RequestType = Literal["inference", "report"]
MAX_SESSION_TAG_CHARS = 128  # an inference's `session` tag: the openclawrl recipe groups turns into sessions by it


# A random per-process prefix and a counter: unique across processes and restarts without a syscall per id
# (uuid4 reads the OS entropy pool on every call, measurable on the hot path).
_ID_PREFIX = uuid.uuid4().hex[:16]
_ID_COUNTER = itertools.count(1)


def _reseed_ids() -> None:
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = uuid.uuid4().hex[:16], itertools.count(1)


os.register_at_fork(after_in_child=_reseed_ids)  # a forked child must not repeat its parent's ids


def new_record_id() -> str:
    """A fresh receipt id (`rec_` + 16 random hex digits fixed per process + a 12-digit counter)."""
    return f"rec_{_ID_PREFIX}{next(_ID_COUNTER):012x}"


def minted_here(agent_record_id: str) -> bool:
    """Whether `new_record_id()` of this process made this id (no other process or client can have stored it,
    unless a client reuses a receipt as its own id: stores must still refuse a duplicate)."""
    return agent_record_id.startswith(f"rec_{_ID_PREFIX}")


def content_hash(payload: Any) -> str:
    """Stable digest of a JSON-able payload (sorted keys), used for idempotent retries.

    Raises BadRequest for what JSON cannot store faithfully (lone UTF-16 surrogates, integers over 64 bits).
    """
    try:
        encoded = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        raise BadRequest(f"cannot be stored as JSON ({exc})", field="payload")
    return hashlib.sha256(encoded).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One stored interaction or report.

    `payload` for an inference holds `request`, `response`, `dialect`, `release_id`, `timing`, `usage`,
    `complete`, `tags` and (local engine) `training` with token ids and log-probs.
    A report's payload is the validated report body (score, feedback, references, metadata).
    `sequence` is assigned by the store (per scenario, starting at 1); `consumed_step` by the learner.
    """

    agent_record_id: str
    scenario: str
    request_type: RequestType
    payload: dict[str, Any] | None
    content_hash: str
    created_at: float
    sequence: int | None = None
    consumed_step: int | None = None
    body_bytes: int = 0

    @classmethod
    def new(
        cls,
        scenario: str,
        request_type: RequestType,
        payload: dict[str, Any],
        created_at: float,
        agent_record_id: str | None = None,
    ) -> Record:
        return cls(
            agent_record_id=agent_record_id or new_record_id(),
            scenario=scenario,
            request_type=request_type,
            payload=payload,
            content_hash=content_hash(payload),
            created_at=created_at,
        )

    def summary(self) -> dict[str, Any]:
        """Metadata without the payload, as paged by `GET /reef/scenarios/{s}/records`.

        `references`, `score` and `release_id` are read from the payload: once retention evicted the body
        (`evicted`), they are unknown and null (`references` too: an evicted report's citations are unknown, not none).
        """
        payload = self.payload
        return {
            "agent_record_id": self.agent_record_id,
            "scenario": self.scenario,
            "request_type": self.request_type,
            "sequence": self.sequence,
            "created_at": self.created_at,
            "references": None if payload is None else self.references(),
            "score": self.score(),
            "release_id": self.release_id(),
            "content_hash": self.content_hash,
            "consumed_step": self.consumed_step,
            "evicted": payload is None,
        }

    def references(self) -> list[str]:
        """The receipts a report cites ([] for an inference, or when the body is evicted)."""
        cited = self.payload.get("references") if self.payload is not None and self.request_type == "report" else None
        # Imported reports are stored as given: keep only what can be a receipt.
        return [r for r in cited if isinstance(r, str)] if isinstance(cited, list) else []

    def score(self) -> float | None:
        """A report's score (None for an inference, a report without one, or an evicted body)."""
        score = self.payload.get("score") if self.payload is not None and self.request_type == "report" else None
        return score if isinstance(score, int | float) and not isinstance(score, bool) else None

    def release_id(self) -> str | None:
        """The release that served an inference (None for a report, or when the body is evicted)."""
        served = (
            self.payload.get("release_id") if self.payload is not None and self.request_type == "inference" else None
        )
        return served if isinstance(served, str) else None
