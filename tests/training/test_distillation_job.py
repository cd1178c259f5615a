"""The teacher pass in the training job, on the real SmolLM2 (one prompt, short sequences, a few steps)."""

from __future__ import annotations

import pytest
import torch

from reef.core.errors import BadRequest
from reef.core.settings import InferenceSettings, LearningSettings, Settings, TrainingSettings
from reef.learning.base import TrainingJob
from reef.learning.recipes_registry import load_recipe
from reef.recipes.opd import OPDConfig
from reef.recipes.sdft import SDFTConfig
from reef.recipes.sdpo import SDPOConfig
from reef.recipes.sft import SFTConfig
from reef.training.job import run_training_job
from reef.training.jobfile import JobTeacher

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "Reply with only the answer. 17 + 5 ="}]


@pytest.fixture(scope="module")
def rollout(greedy_rollout) -> dict:
    """A recorded rollout as the engine captures it: the base model's greedy answer and its log-probs."""
    teacher = [*QUESTION, {"role": "assistant", "content": "22"}, *QUESTION]
    return {**greedy_rollout(QUESTION, 8), "teacher_messages": teacher}


def training(**overrides) -> TrainingSettings:
    return TrainingSettings(
        lora_rank=8, learning_rate=2e-3, max_seq_len=96, target_modules=["q_proj", "v_proj"], **overrides
    )


def test_sdft_with_the_base_as_teacher_moves_the_student_toward_the_teacher_with_the_answer_in_context(
    base_model_path, rollout, tmp_path
):
    job = TrainingJob(base_model_path, None, [rollout], "sdft", training(epochs=4), SDFTConfig(), tmp_path / "sdft")
    events: list[dict] = []
    result = run_training_job(job, progress=events.append)
    losses = result.metrics["loss"]
    assert losses[-1] < losses[0] and losses[0] > 0
    assert result.metrics["teacher"] == "self" and result.metrics["teacher_s"] > 0
    assert all("teacher_kl" in e for e in events)
    assert (tmp_path / "sdft" / "adapter_model.safetensors").exists() and not (tmp_path / "sdft" / "ema").exists()


def test_the_ema_teacher_is_saved_with_the_release_and_the_next_job_starts_from_it(base_model_path, rollout, tmp_path):
    from safetensors.torch import load_file

    sample = {**rollout, "weight": 1.0}
    first = TrainingJob(base_model_path, None, [sample], "sdpo", training(), SDPOConfig(top_k=20), tmp_path / "one")
    run_training_job(first)
    policy = load_file(str(tmp_path / "one" / "adapter_model.safetensors"))
    ema = load_file(str(tmp_path / "one" / "ema" / "adapter_model.safetensors"))
    assert set(ema) == set(policy)
    lora_b = [name for name in policy if "lora_B" in name]
    # One step at ρ = 0.05 from a fresh adapter (lora_B = 0): the EMA's lora_B is 0.05 of the policy's.
    assert all(torch.allclose(ema[name], 0.05 * policy[name], atol=1e-7) for name in lora_b)
    second = TrainingJob(
        base_model_path, tmp_path / "one", [sample], "sdpo", training(), SDPOConfig(), tmp_path / "two"
    )
    run_training_job(second)
    policy_two = load_file(str(tmp_path / "two" / "adapter_model.safetensors"))
    ema_two = load_file(str(tmp_path / "two" / "ema" / "adapter_model.safetensors"))
    assert all(torch.allclose(ema_two[n], 0.95 * ema[n] + 0.05 * policy_two[n], atol=1e-6) for n in lora_b)


def test_opd_with_a_release_teacher_lowers_the_students_reverse_kl_to_it(base_model_path, rollout, tmp_path):
    demonstration = {"messages": QUESTION, "completion_text": "22"}
    teacher_job = TrainingJob(
        base_model_path, None, [demonstration], "sft", training(epochs=3), SFTConfig(), tmp_path / "teacher"
    )
    run_training_job(teacher_job)
    student = {key: rollout[key] for key in ("prompt_ids", "completion_ids", "old_logprobs")}
    job = TrainingJob(
        base_model_path,
        None,
        [student],
        "opd",
        training(epochs=4),
        OPDConfig(teacher="release:teacher"),
        tmp_path / "opd",
        teacher=JobTeacher("model", tmp_path / "teacher"),
    )
    events: list[dict] = []
    result = run_training_job(job, progress=events.append)
    assert result.metrics["teacher"] == "model"
    kls = [e["teacher_kl"] for e in events]
    assert kls[0] > 0 and kls[-1] < kls[0]


def test_a_teacher_whose_tokenizer_differs_is_refused_naming_recipe_config_teacher(base_model_path, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model_path)
    tokenizer.add_tokens(["<reef-not-the-students>"])
    tokenizer.save_pretrained(tmp_path / "other")
    (tmp_path / "other" / "config.json").write_text((base_model_path / "config.json").read_text())
    settings = Settings(
        inference=InferenceSettings(model_path=str(base_model_path)),
        learning=LearningSettings(recipe="opd", recipe_config={"teacher": str(tmp_path / "other")}),
    )
    with pytest.raises(BadRequest) as error:
        load_recipe("opd", settings)
    assert error.value.field == "recipe_config.teacher"
    same = tmp_path / "same"
    AutoTokenizer.from_pretrained(base_model_path).save_pretrained(same)
    settings.learning.recipe_config["teacher"] = str(same)
    assert load_recipe("opd", settings).teacher.kind == "path"
