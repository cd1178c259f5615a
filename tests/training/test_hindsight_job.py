"""The `openclawrl` training job on the real SmolLM2: both loss terms per step, the teacher pass on hinted turns."""

from __future__ import annotations

import pytest

from reef.core.settings import TrainingSettings
from reef.learning.base import TrainingJob
from reef.recipes.openclawrl import OpenClawRLConfig
from reef.training.job import run_training_job

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "What color is the sky?"}]
HINTED = [{"role": "user", "content": "What color is the sky?\n\n(Hint for your reply: Answer in at most 5 words.)"}]


@pytest.fixture(scope="module")
def rollout(greedy_rollout) -> dict:
    """The base model's greedy answer with its log-probs, as the engine records a turn."""
    return greedy_rollout(QUESTION, 12)


def test_an_openclawrl_job_logs_both_terms_per_step_and_distils_only_hinted_turns(base_model_path, rollout, tmp_path):
    punished = {**rollout, "advantage": -1.0, "weight": 1.0, "teacher_messages": HINTED, "turn_id": "t1"}
    rewarded = {**rollout, "advantage": 1.0, "weight": 0.0, "turn_id": "t2"}
    settings = TrainingSettings(
        lora_rank=8, learning_rate=1e-3, max_seq_len=96, target_modules=["q_proj", "v_proj"], micro_batch_size=1
    )
    config = OpenClawRLConfig(teacher="self", top_k=20, w_rl=1.0, w_opd=0.5)
    events: list[dict] = []
    job = TrainingJob(base_model_path, None, [punished, rewarded], "openclawrl", settings, config, tmp_path / "out")

    result = run_training_job(job, progress=events.append)

    metrics = result.metrics
    assert metrics["steps"] == 2 and len(metrics["loss_rl"]) == 2 and len(metrics["loss_opd"]) == 2
    for loss, rl, opd in zip(metrics["loss"], metrics["loss_rl"], metrics["loss_opd"], strict=True):
        assert loss == pytest.approx(rl + 0.5 * opd, abs=1e-4)
    hinted = [e for e in events if e["hinted"] == 1]
    assert len(hinted) == 1 and hinted[0]["loss_opd"] > 0 and hinted[0]["teacher_s"] > 0
    assert all(e["loss_opd"] == 0 for e in events if e["hinted"] == 0)
    assert (tmp_path / "out" / "adapter_model.safetensors").exists() and metrics["teacher"] == "self"
