"""Fakes for the openclawrl recipe: a rule judge that can be switched off, turns as records, a training backend
that keeps the turns it trained on.

`rule_judge` reads the next state: a user message containing "too long" is −1 with a hint, anything else +1.
Set `JUDGE.mode` to `"raise"` (the judge answers with an error) or `"ok"`; `JUDGE.calls` counts the calls.
"""

from __future__ import annotations

import json
import time
from typing import Any

from reef.core.records import Record
from reef.judge.base import JudgeRequest
from reef.learning.base import TrainingJob, TrainingResult
from tests.fakes.dict_engine import ANSWERS_FILE, read_answers
from tests.fakes.training_backend import FakeTrainingBackend


class _JudgeState:
    mode = "ok"
    calls = 0


JUDGE = _JudgeState()


def rule_judge(request: JudgeRequest) -> dict[str, Any]:
    JUDGE.calls += 1
    if JUDGE.mode == "raise":
        raise ConnectionError("the judge is unreachable")
    text = str(request.next_state.get("content") or "")
    if "too long" in text:
        return {"vote": -1, "hint": "Answer in at most five words."}
    return {"vote": 1}


def turn_record(
    scenario: str,
    messages: list[dict[str, Any]],
    answer: str,
    session: str | None = None,
    created_at: float | None = None,
) -> Record:
    """A chat inference record as the local engine stores it (token capture included)."""
    payload: dict[str, Any] = {
        "dialect": "chat",
        "request": {"messages": messages},
        "response": {"choices": [{"message": {"role": "assistant", "content": answer}}]},
        "training": {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5], "logprobs": [-0.5, -0.7]},
        "complete": True,
    }
    if session is not None:
        payload["tags"] = {"session": session}
    return Record.new(scenario, "inference", payload, created_at=created_at or time.time())


class TurnTrainingBackend(FakeTrainingBackend):
    """Trains nothing; keeps each job's samples (`trained_turns()`) and writes the parent's answers unchanged."""

    def trained_turns(self) -> list[str]:
        return [sample["turn_id"] for job in self.jobs for sample in job.samples]

    def run(self, job: TrainingJob, progress: Any = None) -> TrainingResult:
        self.jobs.append(job)
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("the fake training job crashed")
        job.output_dir.mkdir(parents=True, exist_ok=True)
        (job.output_dir / ANSWERS_FILE).write_text(json.dumps(read_answers(job.parent_adapter_path)))
        (job.output_dir / "adapter_config.json").write_text(json.dumps({"r": 1}))
        return TrainingResult(job.output_dir, {"loss": [0.5]})
