"""A small learning deployment for tests: real SQLite record store, real git release store, real commit log,
the fake dict engine and fake training backend, and a `Runtime` over them. `restart()` reopens everything on
the same directories, as a process restart would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from reef.application.runtime import Runtime
from reef.core.records import Record
from reef.core.settings import EvaluationSettings, InferenceSettings, LearningSettings, Settings, StorageSettings
from reef.learning.base import Recipe
from reef.learning.evaluation.holdout import is_held_out
from reef.releases import FileCommitLog
from reef.releases.git import open_release_store
from reef.storage.base import RecordStore
from reef.storage.sql import open_record_store
from tests.fakes.dict_engine import DictEngine
from tests.fakes.learning_recipe import DemoRecipe
from tests.fakes.training_backend import FakeTrainingBackend

QUESTIONS = {f"what is {n} + {n}?": str(2 * n) for n in range(1, 5)}


def write_tasks(path: Path, answers: dict[str, str], checker: str = "exact") -> Path:
    path.write_text(
        "".join(json.dumps({"prompt": q, "checker": checker, "answer": a}) + "\n" for q, a in answers.items())
    )
    return path


@dataclasses.dataclass
class World:
    root: Path
    settings: Settings
    recipe_cls: type[Recipe]
    backend: FakeTrainingBackend
    records: RecordStore
    engine: DictEngine
    runtime: Runtime

    def report(self, scenario: str, prompt: str, answer: str) -> Record:
        """Append a demonstration report (durably) and wake the learner."""
        payload = {"feedback": {"prompt": prompt, "answer": answer}}
        (stored,) = self.records.append([Record.new(scenario, "report", payload, created_at=time.time())])
        self.runtime.notify(scenario)
        return stored

    def releases(self, scenario: str) -> list[dict[str, Any]]:
        """The scenario's releases as `GET /reef/scenarios/{s}/releases` lists them, newest first."""
        return [row.to_json() for row in self.runtime.releases(scenario)]

    def commits(self, scenario: str, after_step: int = -1, limit: int = 100) -> list[dict[str, Any]]:
        """The scenario's commit log as `GET /reef/scenarios/{s}/commits` shows it, ascending from `after_step`."""
        return [commit.to_json() for commit in self.runtime.commits(scenario, after_step, limit)]

    def restart(self, backend: FakeTrainingBackend | None = None, **runtime_options: Any) -> World:
        """A new process on the same directories (call `await world.runtime.stop()` first if it runs)."""
        self.records.close()
        return open_world(self.root, self.settings, self.recipe_cls, backend or self.backend, **runtime_options)


def make_settings(
    root: Path,
    *,
    tasks: dict[str, str] | None = QUESTIONS,
    policy: str = "score_comparison",
    batch_size: int = 2,
    mode: str = "manual",
    review: bool = False,
) -> Settings:
    tasks_path = write_tasks(root / "tasks.jsonl", tasks) if tasks else None
    # A stand-in base model directory: the fake backend never loads it, and nothing converts the real one.
    model = root / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text("{}")
    return Settings(
        inference=InferenceSettings(backend="local", model_path=str(model)),
        storage=StorageSettings(dir=root / "state"),
        learning=LearningSettings(recipe="demo", mode=mode, batch_size=batch_size, review=review, poll_interval_s=0.05),
        evaluation=EvaluationSettings(tasks=tasks_path, policy=policy),
    )


def open_world(
    root: Path,
    settings: Settings,
    recipe_cls: type[Recipe] = DemoRecipe,
    backend: FakeTrainingBackend | None = None,
    **runtime_options: Any,
) -> World:
    backend = backend or FakeTrainingBackend()
    records = open_record_store("sqlite", directory=root / "records")
    releases = open_release_store(str(root / "releases.git"), root / "release-work")
    commits = FileCommitLog(root / "commits")
    engine = DictEngine()
    runtime = Runtime(
        settings,
        records,
        releases,
        commits,
        engine,
        recipe=recipe_cls(settings),
        backend_factory=lambda: backend,
        **runtime_options,
    )
    return World(root, settings, recipe_cls, backend, records, engine, runtime)


def make_world(
    root: Path,
    recipe_cls: type[Recipe] = DemoRecipe,
    backend: FakeTrainingBackend | None = None,
    **settings_options: Any,
) -> World:
    return open_world(root, make_settings(root, **settings_options), recipe_cls, backend)


class Crash(BaseException):
    """Stands for the process dying: no `except Exception` in the learner catches it."""


def crash_at(stage: str) -> Any:
    """A release store fault hook that "kills the process" at `stage`."""

    def hook(where: str) -> None:
        if where == stage:
            raise Crash(where)

    return hook


async def started(world: World, scenario: str = "math") -> World:
    """The world's runtime started, with `scenario` created."""
    await world.runtime.start()
    await world.runtime.ensure_scenario(scenario)
    return world


async def considered(world: World, record: Record, scenario: str = "math", timeout_s: float = 30.0) -> None:
    """Wait until the learner's loop has decided on `record` (status `records_considered`): whatever that record
    alone would start has started (and committed) by then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while world.runtime.status()["scenarios"][scenario].get("records_considered", 0) < (record.sequence or 0):
        if loop.time() > deadline:
            raise AssertionError(f"the learner of {scenario!r} never considered record {record.sequence}")
        await asyncio.sleep(0.02)


def consumed_steps(world: World, scenario: str = "math") -> dict[str, int | None]:
    """Each record of `scenario` → the step that consumed it (None: not consumed)."""
    return {r.agent_record_id: r.consumed_step for r in world.records.page(scenario, 0, 1000)}


EVERY = 4  # the default evaluation.holdout_every


def report_id(held_out: bool, taken: set[str]) -> str:
    """A fresh report id that falls in (or out of) the held-out split."""
    number = 0
    while True:
        number += 1
        candidate = f"rep-{number}"
        if candidate not in taken and is_held_out(candidate, EVERY) == held_out:
            taken.add(candidate)
            return candidate
