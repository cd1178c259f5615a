"""The runtime's typed answers carry exactly the keys their types name: a TypedDict is not checked when the program
runs, so a key a producer adds or drops without its type would otherwise go unnoticed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest

from reef.core.settings import LearningSettings, Settings, StorageSettings
from reef.core.views import (
    ArchiveView,
    ContractView,
    EvaluationStatus,
    LearningStatus,
    NextStepView,
    RolloutView,
    StatusView,
)
from reef.learning.rollout.state import Rollout
from tests.fakes.service_app import in_process_edge


def keys(typed: Any) -> tuple[set[str], set[str]]:
    """The required keys of a TypedDict, and all its keys (its module postpones annotations, so they are read here)."""
    hints = get_type_hints(typed, include_extras=True)
    return {key for key, hint in hints.items() if get_origin(hint) is not NotRequired}, set(hints)


def assert_keys(answer: Mapping[str, Any], typed: Any) -> None:
    required, every = keys(typed)
    assert required <= set(answer) <= every


@pytest.mark.parametrize("recipe", ["evolve", "sft"])
async def test_contract_status_and_rollout_answers_match_their_types(tmp_path: Path, recipe: str) -> None:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), learning=LearningSettings(recipe=recipe))
    async for _, runtime in in_process_edge(settings, tmp_path):
        await runtime.ensure_scenario("s")
        assert_keys(runtime.contract("s"), ContractView)
        status = runtime.status()
        assert_keys(status, StatusView)
        assert_keys(status["learning"], LearningStatus)
        assert_keys(status["evaluation"], EvaluationStatus)
        assert_keys(runtime.rollout("s"), RolloutView)


def test_an_open_rollout_matches_the_rollout_type() -> None:
    rollout = Rollout.open("s", "candidate", "incumbent", 0.1, 0.05, 0)
    assert_keys(rollout.view(0.0, 1.0), RolloutView)
    assert set(rollout.view(0.0, 1.0)) == keys(RolloutView)[1]


@pytest.mark.parametrize("recipe", ["tttd", "guidance-ttt"])
async def test_the_search_answers_match_their_types(tmp_path: Path, recipe: str) -> None:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), learning=LearningSettings(recipe=recipe))
    async for _, runtime in in_process_edge(settings, tmp_path):
        await runtime.ensure_scenario("s")
        assert_keys(await runtime.archive("s", 5), ArchiveView)
        assert_keys(await runtime.archive_next("s", 4), NextStepView)  # the default grid has 4 groups
