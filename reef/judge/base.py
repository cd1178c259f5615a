"""The judge's values and contract: what it is asked (`JudgeRequest`), what it answers (`Vote`), what a turn gets
(`Verdict`, stored as a report record that cites the turn)."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any

from reef.core.records import Record

VERDICT_KEY = "judge"  # a verdict record's `metadata.judge`; refused in reports sent by clients


@dataclasses.dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One turn to judge: the conversation before it, the assistant's answer and its next state."""

    turn_id: str
    messages: tuple[dict[str, Any], ...]
    answer: str
    next_state: dict[str, Any]
    next_record_id: str
    session: str


@dataclasses.dataclass(frozen=True, slots=True)
class Vote:
    """One judge answer: the vote in {−1, 0, +1}, a hindsight hint (after a −1) and the raw reply."""

    value: int
    hint: str | None = None
    raw: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """A judged turn: its votes, the reward (their plurality) and the deduplicated hints."""

    turn_id: str
    votes: tuple[int, ...]
    reward: int
    hints: tuple[str, ...]
    judge: str
    next_state: dict[str, Any]
    next_record_id: str
    session: str

    def record(self, scenario: str, created_at: float) -> Record:
        """The verdict as a report record citing the turn (id `judge-<turn id>`), listed with the scenario's
        records (`GET /reef/scenarios/{s}/records`), consumed with the turn."""
        payload = {
            "score": self.reward,
            "references": [self.turn_id],
            "feedback": "process-reward judge verdict",
            "metadata": {
                VERDICT_KEY: {
                    "votes": list(self.votes),
                    "reward": self.reward,
                    "hints": list(self.hints),
                    "judge": self.judge,
                    "next_state": self.next_state,
                    "next_record_id": self.next_record_id,
                    "session": self.session,
                }
            },
        }
        return Record.new(scenario, "report", payload, created_at, agent_record_id=f"judge-{self.turn_id}")


class Judge(abc.ABC):
    """Casts one vote on one turn (an endpoint call or a function call)."""

    name: str

    @abc.abstractmethod
    async def vote(self, request: JudgeRequest) -> Vote:
        """One vote, with a hint when it is −1 and the judge gave one; raises on failure (the worker retries)."""

    async def aclose(self) -> None:  # noqa: B027 - only endpoint judges hold a connection pool
        """Release what the judge holds."""

    def meter(self, on_usage: Callable[[Any], None]) -> None:  # noqa: B027 - only endpoint judges spend tokens
        """Hand each answer's `usage` to `on_usage` (the learner's upstream budget counts it)."""
