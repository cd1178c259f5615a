"""A training job travels to the training process typed: its settings and recipe configuration are validated again
there, and every default of theirs lives once, in its model."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from reef.core.settings import LearningSettings, Settings, TrainingSettings
from reef.learning.base import Batch
from reef.learning.recipes_registry import load_recipe
from reef.recipes.openclawrl import OpenClawRLConfig
from reef.recipes.rl import RLConfig
from reef.training.jobfile import (
    JobConfigInvalid,
    JobTeacher,
    TrainingJob,
    job_from_json,
    job_to_json,
)
from reef.training.loss_names import (
    BUILTIN_LOSSES,
    CLIP_RANGE,
    LOSS_SETTINGS,
    PLAIN_LOSSES,
    TEACHER_PASS,
    known_loss,
    missing_settings,
)
from reef.training.losses import PLAIN, resolve_loss

ROOT = Path(__file__).resolve().parents[2]


def rl_job(tmp_path: Path) -> TrainingJob:
    return TrainingJob(
        base_model_path=tmp_path / "base",
        parent_adapter_path=tmp_path / "parent",
        samples=[{"prompt_ids": [1, 2], "completion_ids": [3], "advantage": 0.5}],
        loss="rl",
        training=TrainingSettings(lora_rank=4, target_modules=["q_proj"]),
        recipe_config=RLConfig(clip_high=0.4, baseline_by="kind"),
        output_dir=tmp_path / "out",
    )


def test_a_job_comes_back_from_its_json_with_its_settings_and_recipe_configuration_typed(tmp_path) -> None:
    job = rl_job(tmp_path)
    back = job_from_json(job_to_json(job))
    assert back == job
    replaying = dataclasses.replace(job, replayed=[{"prompt_ids": [4], "completion_ids": [5], "advantage": 1.0}])
    assert job_from_json(job_to_json(replaying)).replayed == replaying.replayed
    assert isinstance(back.recipe_config, RLConfig) and back.recipe_config.clip_low == RLConfig().clip_low


def test_a_distillation_jobs_teacher_travels_with_it(tmp_path) -> None:
    job = TrainingJob(
        tmp_path / "base",
        None,
        [],
        "openclawrl",
        TrainingSettings(),
        OpenClawRLConfig(teacher="release:r1", top_k=8),
        tmp_path / "out",
        teacher=JobTeacher("model", tmp_path / "teacher"),
    )
    assert job_from_json(job_to_json(job)) == job


def test_a_recipe_without_a_config_model_hands_its_dict_to_the_job_as_given(tmp_path) -> None:
    job = TrainingJob(tmp_path, None, [], "pkg.mod:loss", TrainingSettings(), {"anything": [1, 2]}, tmp_path / "o")
    assert job_from_json(job_to_json(job)).recipe_config == {"anything": [1, 2]}


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("recipe_config", "clip_high", "wide"),
        ("recipe_config", "kl_coef", True),
        ("recipe_config", "no_such_key", 1),
        ("training", "lora_rank", "sixteen"),
        ("training", "compute_dtype", "float8"),
    ],
)
def test_a_job_whose_configuration_does_not_fit_its_model_fails_in_the_job_naming_the_field(
    tmp_path, section, key, value
) -> None:
    data = job_to_json(rl_job(tmp_path))
    values = data["recipe_config"]["values"] if section == "recipe_config" else data["training"]
    values[key] = value
    with pytest.raises(JobConfigInvalid) as error:
        job_from_json(data)
    assert error.value.field == f"{section}.{key}"
    assert f"{section}.{key}" in str(error.value)


def test_a_recipes_job_carries_the_deployments_training_settings_and_its_typed_configuration() -> None:
    settings = Settings(
        training=TrainingSettings(lora_rank=2, target_modules=["o_proj"]),
        learning=LearningSettings(recipe="grpo", recipe_config={"group_size": 2, "clip_high": 0.5}),
    )
    recipe = load_recipe("grpo", settings)
    job = recipe.training_job(Batch("b", [{"x": 1}], ["r1"]), Path("base"), None, Path("out"))
    assert job.training.target_modules == ["o_proj"] and job.loss == "grpo"
    back = job_from_json(job_to_json(job))
    assert back.recipe_config == recipe.recipe_config and back.recipe_config.clip_high == 0.5  # type: ignore[union-attr]


def test_the_default_of_a_loss_setting_is_written_once_in_the_package() -> None:
    written = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "reef").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"clip_high\b.*\b0\.28\b", line)
    ]
    assert len(written) == 1 and written[0].startswith("reef/recipes/weights.py:"), written


def test_the_training_job_reads_no_setting_with_a_default_of_its_own() -> None:
    defaulted = []
    for path in sorted((ROOT / "reef" / "training").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and "config" in ast.unparse(node.func.value)
                and len(node.args) > 1
            ):
                defaulted.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert defaulted == []


def test_a_loss_name_can_be_checked_before_any_job_runs() -> None:
    assert all(known_loss(name) for name in BUILTIN_LOSSES)
    assert known_loss("reef.training.losses:sft")
    assert not known_loss("filtered_sft_noloss")
    assert not known_loss("reef.training.losses:no_such_loss")
    assert not known_loss("no_such_package.module:loss")
    assert set(PLAIN) == PLAIN_LOSSES


def test_the_job_still_refuses_an_unknown_loss_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown loss 'filtered_sft_noloss'.*'sft'"):
        resolve_loss("filtered_sft_noloss")


def test_the_settings_a_builtin_loss_reads_are_declared_by_the_recipes_that_use_it() -> None:
    from reef.learning.recipes_registry import builtin_recipes
    from reef.recipes.sft import SFTConfig
    from reef.recipes.weights import WeightsRecipe

    trained = {name: cls for name, cls in builtin_recipes().items() if issubclass(cls, WeightsRecipe)}
    assert {cls.loss_name for cls in trained.values()} >= BUILTIN_LOSSES
    missing = {name: missing_settings(cls.loss_name or name, cls.config_model) for name, cls in trained.items()}
    assert missing == dict.fromkeys(trained, [])
    assert missing_settings("rl", SFTConfig) == ["clip_high", "clip_low"]
    assert missing_settings("rl", None) == ["clip_high", "clip_low"]
    assert missing_settings("package.module:loss", None) == []


def test_the_settings_listed_per_loss_are_the_ones_the_losses_read() -> None:
    from reef.training.distillation import DistillationTerms
    from reef.training.hindsight import HindsightTerms
    from reef.training.losses import ClipRange

    def members(protocol: type) -> set[str]:
        return {
            name for klass in protocol.__mro__ for name, value in vars(klass).items() if isinstance(value, property)
        }

    assert members(ClipRange) == CLIP_RANGE
    assert members(DistillationTerms) | {"teacher", "ema_rate"} == TEACHER_PASS
    assert members(HindsightTerms) == LOSS_SETTINGS["openclawrl"] - TEACHER_PASS
