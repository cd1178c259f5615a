"""The learning side of the configuration: which recipe learns and when (`learning`), how weights train
(`training`), the gate (`evaluation`) and how an accepted release earns its traffic (`rollout`). Part of
`reef.core.settings.Settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from reef.core.section import Section


class LearningSettings(Section):
    recipe: str = Field(
        "basic", description="The recipe a new scenario learns with (a built-in name or `package.module:Class`)."
    )
    mode: Literal["auto", "manual", "hybrid"] = Field(
        "auto",
        description="The training mode a new scenario starts in (each scenario's own is changed with "
        "`POST /reef/scenarios/{s}/update`): `auto` steps whenever a batch is ready, `manual` only when asked "
        "(`POST /reef/train`), `hybrid` both.",
    )
    batch_size: int = Field(8, gt=0, description="Reports a learner step waits for.")
    rehearsal_share: float = Field(
        0.75,
        ge=0,
        lt=1,
        description="The share of each step's training items that are earlier ones replayed, so a new lesson does "
        "not erase the ones before it (recipes that rehearse: `sft`); drawn from the records published steps "
        "consumed, never consumed again (trained `learning.rehearsal_passes` times a step). 0: off, every batch is "
        "new items only.",
    )
    rehearsal_passes: int = Field(
        2,
        ge=1,
        description="How many times a step trains each replayed item, its epochs sharing the passes out (at most "
        "`training.epochs`, one pass an epoch). Each pass keeps earlier lessons better and costs a pass over the "
        "replay.",
    )
    rehearsal_max_items: int = Field(
        512,
        ge=0,
        description="Per scenario, the most earlier records rehearsal draws from: a fixed-size sample of every record "
        "a published step consumed, re-derived from the commit log (ids only; the records stay in the record "
        "store). 0: off.",
    )
    review: bool = Field(
        False, description="Every winning candidate waits for a person's approval before it is published."
    )
    poll_interval_s: float = Field(1.0, gt=0, description="How often a learner looks for a ready batch.")
    election_timeout_s: float = Field(
        15.0,
        gt=0,
        description="A scenario whose learner's replica died (or lost its lock) gets a new learner on another "
        "replica within this.",
    )
    recipe_config: dict[str, Any] = Field(
        default_factory=dict,
        description="The recipe's own configuration (see the recipe configuration reference); checked by the recipe.",
    )
    max_upstream_tokens_per_hour: int = Field(
        0,
        ge=0,
        description=(
            "Per scenario, the most tokens the learner's own traffic (proposer, judge, gate generation and gate "
            "episodes' requests) may spend upstream over a sliding hour, counted from the upstream's `usage`; past "
            'it the learner pauses (status `blocked: "budget: …"`) until the window allows. 0: no limit.'
        ),
    )


class TrainingSettings(Section):
    backend: Literal["local", "ray"] = Field(
        "local", description="Where training steps run: a local child process, or a Ray cluster."
    )
    ray_address: str | None = Field(None, description="The Ray cluster's address (`backend: ray`).")
    ray_num_cpus: float = Field(1.0, gt=0, description="CPUs a Ray training task asks for.")
    ray_num_gpus: float = Field(0.0, ge=0, description="GPUs a Ray training task asks for.")
    ray_resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources a training task asks for, which place it (e.g. {trainer: 1} on nodes "
        "that declare them).",
    )
    lora_rank: int = Field(16, gt=0, description="The LoRA adapter's rank.")
    lora_alpha: int = Field(32, gt=0, description="The LoRA adapter's alpha (scaling).")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="The LoRA adapter's dropout.")
    target_modules: list[str] = Field(
        default_factory=list,
        description="The modules a LoRA adapter wraps, by name (e.g. `[q_proj, v_proj]`); empty: every linear "
        "projection in the model's blocks, as its own architecture names them (the output head excluded).",
    )
    full_finetune: bool = Field(False, description="Train every weight instead of a LoRA adapter.")
    learning_rate: float = Field(
        6e-4,
        gt=0,
        description="The optimizer's learning rate (measured by benchmarks/learns_by_default.py; see the results "
        "pages).",
    )
    epochs: int = Field(1, gt=0, description="Passes over a step's batch.")
    micro_batch_size: int = Field(8, gt=0, description="Sequences per forward/backward pass.")
    max_seq_len: int = Field(512, gt=0, description="Training sequences are truncated to this many tokens.")
    seed: int = Field(0, description="The training step's random seed.")
    threads: int = Field(
        0, ge=0, description="The local backend's torch threads; 0: all cores but one (serving keeps a core)."
    )
    compute_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="The training step's matmul precision (fp32 master weights either way): `auto` is bfloat16 for "
        "a LoRA on CUDA and on CPUs with AMX or AVX-512 BF16, else float32.",
    )


class EvaluationSettings(Section):
    tasks: Path | None = Field(
        None, description="A JSONL file of gate tasks for every scenario (in addition to tasks posted by API)."
    )
    policy: str = Field(
        "mean",
        description="How the gate decides: `mean`, `score_comparison` (wins − losses), `significant_mean`, "
        "`always`, `floor`, or `package.module:Class`. `mean`: for 0/1 checkers the same as wins > losses; for "
        "partial credit it publishes what raises the average.",
    )
    margin: float = Field(0.0, description="How far a candidate must beat the current release to be published.")
    max_new_tokens: int = Field(64, gt=0, description="The answer length when the gate generates.")
    temperature: float = Field(0.0, ge=0, description="The sampling temperature when the gate generates.")
    scoring: Literal["checker", "likelihood"] = Field(
        "checker",
        description="How a gate task is scored: `checker` (the model answers; the task's checker scores the text) or "
        "`likelihood` (no generation: the geometric-mean probability of the task's known `answer` and end of "
        "turn, teacher-forced; needs an engine that scores, i.e. the local one).",
    )
    max_parallel_tasks: int = Field(
        8, gt=0, description="Gate tasks in flight at once (each sends candidate and current together)."
    )
    holdout_every: int = Field(
        4,
        ge=0,
        description="With no tasks of its own (API or file), a scenario's gate holds out about one in this many "
        "reports that carry a known answer (0: never).",
    )
    holdout_min_tasks: int = Field(4, gt=0, description="Held-out tasks a scenario's gate waits for before it judges.")
    retention_items: int = Field(
        64,
        ge=0,
        description="The most gate tasks from earlier lessons (held out or posted before the serving release was "
        "published, spread evenly over time and over lessons) a scenario's retention set keeps; the gate refuses a "
        "candidate that loses more than `max_regression` on them (0: no retention guard).",
    )
    max_regression: float = Field(
        0.05,
        ge=0,
        description="How much a candidate's paired mean score on the retention set may fall below the serving "
        "release's, beyond one standard error of the paired differences, before the gate refuses it.",
    )
    max_tasks_bytes: int = Field(
        8 * 1024 * 1024, gt=0, description="The largest `POST /reef/scenarios/{s}/tasks` body."
    )
    floor_score: float = Field(
        0.0,
        description="Policy `floor` (the selection of user-directed harness steps): publish unless the candidate's "
        "mean is below it.",
    )
    allow_api_code: bool = Field(
        False,
        description=(
            "Accept, through POST /reef/scenarios/{s}/tasks, task fields that run code on this machine: a "
            "`module:function` checker, `check.command` and `workspace.dir` (the operator's own evaluation.tasks "
            "file may always use them). Off, such a task is a 400 naming the field."
        ),
    )
    checker_modules: list[str] = Field(
        default_factory=list,
        description=(
            "The modules whose functions a task given through the API may name as its `module:function` checker "
            "(with evaluation.allow_api_code true); a checker in any other module is a 400. Default: none."
        ),
    )


class RolloutSettings(Section):
    mode: Literal["immediate", "canary"] = Field(
        "immediate",
        description=(
            "What a release the gate accepts does: `immediate` serves it for all traffic at once; `canary` opens a "
            "rollout that serves it to a share of the traffic until live reports decide (a scenario's own mode is "
            "set with `POST /reef/scenarios/{s}/update` `rollout_mode`)."
        ),
    )
    canary_share: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="The share of the scenario's traffic (sessions, users or requests) the canary serves.",
    )
    alpha: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="The sequential test's level: the chance, however often it is looked at, of deciding for a "
        "difference that is not there.",
    )
    max_duration_s: float = Field(
        86400.0, gt=0, description="A rollout still undecided after this many seconds ends with `on_timeout`."
    )
    max_reports: int = Field(
        2000, gt=0, description="A rollout still undecided after this many attributed reports ends with `on_timeout`."
    )
    on_timeout: Literal["promote", "rollback"] = Field(
        "promote",
        description="What an undecided rollout does at its limit (`promote`: the offline gate already accepted it).",
    )
    score_min: float = Field(0.0, description="The lowest report score; a score below counts as this.")
    score_max: float = Field(1.0, description="The highest report score; a score above counts as this.")
    check_interval_s: float = Field(
        1.0, gt=0, description="How often the scenario's learner replica reads new reports and applies the test."
    )

    @model_validator(mode="after")
    def _score_range(self) -> RolloutSettings:
        if self.score_max <= self.score_min:
            raise ValueError("score_max must be above score_min")
        return self
