"""Each harness method completes a learner step on the real SmolLM2 (published or rejected, scores committed).

SmolLM2 serves and proposes (the default proposer: the served model through the engine); the gate scores the
candidate and the serving tree, paired, on two held-out tasks. Short proposer replies keep each step small.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reef.application.runtime import Runtime
from reef.core.settings import EvaluationSettings, InferenceSettings, LearningSettings, Settings, StorageSettings
from reef.inference.local import LocalEngine
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import open_release_store
from reef.storage import open_record_store
from tests.harness.conftest import judged_records
from tests.inference.local.conftest import MODEL_CACHE_DIR

pytestmark = pytest.mark.model

TRAIN = {"what is 3 + 3? Reply with the number only.": "6", "what is 4 + 4? Reply with the number only.": "8"}
HELD_OUT = {"what is 2 + 2? Reply with the number only.": "4", "what is 5 + 5? Reply with the number only.": "10"}


@pytest.fixture()
async def engine() -> AsyncIterator[LocalEngine]:
    from reef.inference.local import resolve_model_path

    model_dir = resolve_model_path("smollm2", MODEL_CACHE_DIR)
    local = LocalEngine(
        InferenceSettings(backend="local", model_path=str(model_dir), device="cpu", default_max_new_tokens=16)
    )
    await local.start()
    yield local
    await local.aclose()


@pytest.mark.parametrize("method", ["evolve", "gepa", "ace", "reasoning_bank"])
async def test_each_harness_method_completes_a_step_on_smollm2(method: str, engine: LocalEngine, tmp_path: Path):
    tasks = tmp_path / "heldout.jsonl"
    tasks.write_text(
        "".join(json.dumps({"prompt": q, "checker": "contains", "answer": a}) + "\n" for q, a in HELD_OUT.items())
    )
    settings = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(
            recipe=method,
            mode="manual",
            batch_size=2,
            # minibatch_size is gepa's own: another method refuses a key it does not declare.
            recipe_config={"proposer_max_tokens": 48, **({"minibatch_size": 2} if method == "gepa" else {})},
        ),
        evaluation=EvaluationSettings(tasks=tasks, max_new_tokens=8),
    )
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "state" / "commits"), engine)
    await runtime.start()
    try:
        await runtime.ensure_scenario("agent")
        records.append(judged_records("agent", TRAIN))
        runtime.notify("agent")
        commit = await runtime.step("agent")
        assert commit is not None
        assert commit["verdict"] in ("published", "kept", "rejected"), commit
        assert len(commit["candidate_scores"]) == len(commit["current_scores"]) == len(HELD_OUT)
        assert runtime.commits("agent")[-1].step == commit["step"]
        if commit["verdict"] == "published":
            assert engine.active_release_id("agent") == commit["release_id"]
    finally:
        await runtime.stop()
        records.close()
