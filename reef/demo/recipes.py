"""How the demo drives each learning recipe: sampling, grading, report bodies and training hyper-parameters."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
from typing import Any, Literal

from reef.application.config import ConfigError, load_settings, parse_overrides
from reef.core.cores import usable_cores
from reef.demo.api import Answer
from reef.demo.distillation import TEACHER_SCENARIO
from reef.demo.tasks import is_exact, partial_credit


@dataclasses.dataclass(frozen=True, slots=True)
class RecipeProfile:
    """One recipe's demo settings.

    `prompts_per_round × samples_per_prompt` reports make one learner batch (`batch_size` units).
    """

    recipe: str
    prompts_per_round: int
    samples_per_prompt: int
    temperature: float
    max_tokens: int
    learning_rate: float
    epochs: int
    batch_size: int
    micro_batch_size: int = 8
    rounds: int = 12
    target_modules: tuple[str, ...] = ()  # empty: the training default (every projection)
    recipe_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    # `evaluation.scoring`: how the learner's gate scores a validation task
    gate_scoring: Literal["checker", "likelihood"] = "checker"
    # What the simulated users report (`--feedback`): `recipe`, what the recipe learns best from; `score`, only
    # whether the sampled answer was right (0 or 1)
    feedback: Literal["recipe", "score"] = "recipe"

    @property
    def grading(self) -> str:
        """How answers are graded: in reports, in the learner's gate and in the headline held-out score.

        `exact` for sft and for scores alone; `partial` (see `partial_credit`) for the RL recipes on their own
        feedback, so they have a signal while exact answers are still rare. Both figures are measured and reported
        either way.
        """
        return "exact" if self.recipe in DEMONSTRATED or self.feedback == "score" else "partial"

    def score(self, answer: Answer) -> float:
        """1 or 0 for an exactly right answer (sft, and `--feedback score`); otherwise RL recipes get partial
        credit (see `partial_credit`)."""
        if self.grading == "exact":
            return float(is_exact(answer.task, answer.text))
        return partial_credit(answer.task, answer.text)

    def metadata(self, answer: Answer, group: str | None, rollout: int = 0) -> dict[str, Any]:
        if self.recipe in DEMONSTRATED:
            return {"demonstration": answer.task.answer}
        if self.recipe == "grpo" and group is not None:
            return {"group": group}
        if self.recipe == "sdpo" and group is not None:
            # A round's send is one grid (`step`): its prompts are the groups, their samples the attempts.
            return {"step": group.rsplit("-", 1)[0], "group": group, "rollout": rollout}
        # The task family: `rl` keeps a running baseline per family (`baseline_by: task`).
        return {"task": answer.task.family}

    def serve_flags(self, learning_rate: float | None = None, epochs: int | None = None) -> list[str]:
        """`reef serve` flags for this recipe (on top of the model, recipe, batch size, tasks, state dir and port)."""
        flags = [
            "--training.learning-rate",
            repr(learning_rate if learning_rate is not None else self.learning_rate),
            "--training.epochs",
            str(epochs if epochs is not None else self.epochs),
            # Demo answers are a word or a number: a short gate is as informative and much cheaper.
            "--evaluation.max-new-tokens",
            "8",
            # The demo waits for each step, so training may use every core.
            "--training.threads",
            str(training_threads()),
            "--training.micro-batch-size",
            str(self.micro_batch_size),
        ]
        if self.gate_scoring != "checker":
            flags += ["--evaluation.scoring", self.gate_scoring]
        if self.target_modules:
            flags += ["--training.target-modules", "[" + ", ".join(self.target_modules) + "]"]
        if self.recipe_config:
            flags += ["--learning.recipe-config", json.dumps(self.recipe_config)]
        return flags


# One lesson has no earlier lesson for rehearsal to keep, and replaying would train each step on up to 2.5 times its
# samples: the one-lesson demos turn it off (the two-phase and stream demos keep `reef serve`'s defaults).
ONE_LESSON_FLAGS = ("--learning.rehearsal-share", "0")


def training_threads() -> int:
    """The demo's training threads: `OMP_NUM_THREADS` where it is set (this process's share of the machine), else
    every core this process may run on."""
    share = os.environ.get("OMP_NUM_THREADS", "")
    if share.isdigit() and int(share) > 0:
        return int(share)
    return usable_cores()


HARNESS_METHODS = ("evolve", "gepa", "ace", "reasoning_bank", "meta_harness")
# Recipes whose reports carry the right answer (a harness method's traces read it as `expected`); graded by exact.
DEMONSTRATED = ("sft", "sdft", *HARNESS_METHODS)
# The distillation teacher sees a demonstration as an earlier answer in the conversation, which base SmolLM2
# copies and a described one it does not (`with_context`); sdft shows it four times over, where it copies it always.
SHOWN_AS_TURN = {"context_as": "turn", "context_template": "{context}"}
SHOWN_FOUR_TIMES = {**SHOWN_AS_TURN, "context_turns": 4}

PROFILES: dict[str, RecipeProfile] = {
    # Greedy answers; the report carries the right answer as the demonstration.
    "sft": RecipeProfile(
        "sft", prompts_per_round=8, samples_per_prompt=1, temperature=0.0, max_tokens=8,
        learning_rate=6e-4, epochs=1, batch_size=8,
    ),
    # Sampled answers so the policy explores (temperature 1 makes SmolLM2 ramble); short completions. A running
    # baseline per task family: with one baseline for all, "this family is easy" drowns "this answer is good".
    # The gate's defaults: a step that ties its gate is kept and the next one trains from it (the lineage).
    "rl": RecipeProfile(
        "rl", prompts_per_round=16, samples_per_prompt=1, temperature=0.7, max_tokens=12,
        learning_rate=1e-3, epochs=2, batch_size=16, micro_batch_size=8, rounds=40,
        target_modules=("q_proj", "v_proj"), recipe_config={"baseline_decay": 0.8, "baseline_by": "task"},
    ),
    # k samples per prompt; advantages are relative within each prompt's group.
    "grpo": RecipeProfile(
        "grpo", prompts_per_round=2, samples_per_prompt=4, temperature=0.7, max_tokens=12,
        learning_rate=1e-3, epochs=2, batch_size=8, recipe_config={"group_size": 4},
    ),
    # Greedy rollouts like sft; the report's demonstration reaches the (frozen, base) teacher, not the loss. At 1e-3
    # float32 serving (CPUs without native bfloat16) learnt phase two so far that phase one lost a third; 5e-4 kept it.
    # The gate scores how likely each side is to say exactly the known answer (what a demonstration teaches), which
    # rises step by step where 14 exact scores move by whole tasks or not at all (retention met more often;
    # docs/results/).
    "sdft": RecipeProfile(
        "sdft", prompts_per_round=8, samples_per_prompt=1, temperature=0.0, max_tokens=8,
        learning_rate=5e-4, epochs=2, batch_size=8, recipe_config=SHOWN_FOUR_TIMES, gate_scoring="likelihood",
    ),
    # One grid a round: 4 prompts × 4 sampled attempts; a sibling's successful answer is each attempt's context.
    # A step trains on ~3 attempts: at 1e-3 candidates swung between 0.00 and 0.57 on the gate's tasks (README).
    # Success is partial credit ≥ 0.7 (the answer with at most one more word): at the recipe's 0.5 most of base
    # SmolLM2's successes are sentences ("The number is 384."), which the teacher then taught. What is taught is
    # then the answer itself, so the gate scores its likelihood, as sdft's does (README). Base SmolLM2 gives such
    # an answer about once in a hundred attempts, so early grids often have none and train nothing (a round of
    # 2 s): up to 100 rounds, as many as the 10-minute budget fits.
    "sdpo": RecipeProfile(
        "sdpo", prompts_per_round=4, samples_per_prompt=4, temperature=0.7, max_tokens=12,
        learning_rate=5e-4, epochs=1, batch_size=16, rounds=100,
        recipe_config={**SHOWN_AS_TURN, "groups": 4, "rollouts": 4, "success_threshold": 0.7},
        gate_scoring="likelihood",
    ),
    # Sampled rollouts graded token by token by a teacher the demo first trains with sft (scenario demo-sft).
    "opd": RecipeProfile(
        "opd", prompts_per_round=8, samples_per_prompt=1, temperature=0.7, max_tokens=12,
        learning_rate=1e-3, epochs=2, batch_size=8, recipe_config={"teacher": f"scenario:{TEACHER_SCENARIO}"},
    ),
    # No reports: sessions with a simulated user, judged by a rule-based judge (`demo_openclawrl`, `demo_user`).
    # `prompts_per_round` sessions of `samples_per_prompt` judged answers (one question each) make one batch;
    # sampled so the policy explores.
    "openclawrl": RecipeProfile(
        "openclawrl", prompts_per_round=8, samples_per_prompt=2, temperature=0.8, max_tokens=32,
        learning_rate=1e-3, epochs=2, batch_size=16, micro_batch_size=8, rounds=12,
        target_modules=("q_proj", "v_proj"),
        recipe_config={"judge_function": "reef.demo.user:judge", "votes": 3},
    ),
}  # fmt: skip
# Harness methods on the chat adapter: greedy answers, the right answer in each report; no weights train. The
# proposer is the served model; where its replies are unusable a method's deterministic fallback (solved examples
# as memory) acts, and each round says which (`source`).
PROFILES.update(
    {
        method: RecipeProfile(
            method, prompts_per_round=8, samples_per_prompt=1, temperature=0.0, max_tokens=8,
            learning_rate=6e-4, epochs=1, batch_size=8, rounds=8,  # training flags unused: no weights train
        )
        for method in HARNESS_METHODS
    }
)  # fmt: skip


def recipe_config_flag(text: str) -> dict[str, Any]:
    """`--recipe-config`'s value: a JSON object (argparse reports anything else as an error naming the flag)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg} at character {exc.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f'a JSON object is needed, e.g. \'{{"teacher": "ema"}}\', not {text!r}')
    return value


def serve_flags_flag(text: str) -> list[str]:
    """`--serve-flags`' value: `reef serve` settings flags, split as a shell splits them and checked as `reef serve`
    would check them (argparse reports a bad one as an error naming the flag, before anything starts)."""
    try:
        flags = shlex.split(text)
        load_settings(None, parse_overrides(flags), environ={})
    except (ValueError, ConfigError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return flags


def task_count_flag(text: str) -> int:
    """`--validation-tasks`' value: a whole number from 1 to 200."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number is needed, not {text!r}") from None
    if not 1 <= value <= 200:
        raise argparse.ArgumentTypeError(f"from 1 to 200 tasks, not {value}")
    return value


def seed_count_flag(text: str) -> int:
    """`--seeds`' value: a whole number from 1 to 20."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number is needed, not {text!r}") from None
    if not 1 <= value <= 20:
        raise argparse.ArgumentTypeError(f"from 1 to 20 seeds, not {value}")
    return value


# Where a suite needs other settings than the skills suite's: per suite, per recipe, the fields that differ. They
# were chosen on seeds the docs never report (docs/results/2026-12-06-catalogue-demo.md).
SUITE_PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    # Forty invented facts, each taught in three phrasings: every round shows all 120 demonstrations, several times
    # over with small micro-batches (more optimizer steps); at the skills suite's 8 a round nothing is learnt.
    "catalogue": {
        "sft": {
            "prompts_per_round": 120, "batch_size": 120, "micro_batch_size": 4, "epochs": 3,
            "learning_rate": 1e-3, "rounds": 3,
        },
    },
}  # fmt: skip


# `--feedback score`: per suite, per recipe, the fields that differ from the suite's profile. The best of those tried
# on seed 100, none of which taught the facts (docs/results/2026-12-07-scores-alone.md).
SCORE_PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    # About one sampled answer in twelve is right at first. At 1e-3 and two epochs rl collapsed within one step (the
    # policy moved 3-6 nats from its recorded log-probs), so these take small steps.
    "catalogue": {
        "rl": {
            "prompts_per_round": 60, "samples_per_prompt": 4, "temperature": 0.7, "max_tokens": 8,
            "batch_size": 240, "micro_batch_size": 8, "epochs": 1, "learning_rate": 3e-4, "rounds": 12,
            "target_modules": (), "recipe_config": {"baseline_decay": 0.8, "baseline_by": "task"},
        },
        "grpo": {
            "prompts_per_round": 30, "samples_per_prompt": 8, "temperature": 0.7, "max_tokens": 8,
            "batch_size": 120, "micro_batch_size": 8, "epochs": 1, "learning_rate": 3e-4, "rounds": 12,
            "recipe_config": {"group_size": 8},
        },
    },
}  # fmt: skip
SCORED = ("rl", "grpo")  # the recipes `--feedback score` runs


def demo_profile(
    recipe: str, overrides: dict[str, Any] | None, suite: str = "skills", feedback: str = "recipe"
) -> RecipeProfile:
    """`recipe`'s profile on `suite` with the users' `feedback`, its `recipe_config` updated key by key from
    `--recipe-config` (None: unchanged)."""
    profile = PROFILES[recipe]
    settings = SUITE_PROFILES.get(suite, {}).get(recipe)
    if settings:
        profile = dataclasses.replace(profile, **settings)
    if feedback == "score":
        profile = dataclasses.replace(profile, **SCORE_PROFILES.get(suite, {}).get(recipe, {}), feedback="score")
    if not overrides:
        return profile
    return dataclasses.replace(profile, recipe_config={**profile.recipe_config, **overrides})
