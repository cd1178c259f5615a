"""Fixtures for harness tests: traces as a processor builds them, and a growth context over a fake engine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from reef.core.records import Record
from reef.core.settings import EvaluationSettings, LearningSettings, Settings, StorageSettings
from reef.harness.traces import TraceProcessor
from reef.learning.growth import GrowContext
from tests.fakes.prompt_engine import PromptEngine

QUESTIONS = {f"what is {n} + {n}?": str(2 * n) for n in range(1, 7)}


def judged_records(scenario: str, answers: dict[str, str], wrong: str = "I do not know") -> list[Record]:
    """An inference and a report (score 0, expected answer in the feedback) per question."""
    records = []
    for question, expected in answers.items():
        inference = Record.new(
            scenario,
            "inference",
            {
                "request": {"model": "m", "messages": [{"role": "user", "content": question}]},
                "response": {"choices": [{"message": {"role": "assistant", "content": wrong}}]},
            },
            created_at=time.time(),
        )
        report = Record.new(
            scenario,
            "report",
            {"score": 0.0, "feedback": {"expected": expected}, "references": [inference.agent_record_id]},
            created_at=time.time(),
        )
        records += [inference, report]
    return records


def batch_of(answers: dict[str, str], batch_size: int | None = None):
    processor = TraceProcessor(batch_size or len(answers))
    for record in judged_records("s", answers):
        processor.ingest(record)
    return processor.build_batch()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve", batch_size=4),
        evaluation=EvaluationSettings(max_new_tokens=16),
    )


@pytest.fixture
def engine() -> PromptEngine:
    return PromptEngine()


@pytest.fixture
def make_ctx(tmp_path: Path, settings: Settings, engine: PromptEngine):
    def make(step: int = 1, scenario: str = "s") -> GrowContext:
        work = tmp_path / f"work-{step}"
        work.mkdir()
        return GrowContext(scenario, step, work, settings, engine, None, None, lambda event: None)

    return make


@pytest.fixture
def fake_pi(tmp_path: Path) -> str:
    """The stand-in pi agent (tests/fakes/fake_pi.py) as an executable named `pi`."""
    source = (Path(__file__).parent.parent / "fakes" / "fake_pi.py").read_text()
    binary = tmp_path / "bin" / "pi"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\n{source}")
    binary.chmod(0o755)
    return str(binary)
