"""The shared part of the distillation recipes (`sdft`, `sdpo`, `opd`): the teacher, its prompt, its resolution.

A distillation sample is the student's recorded rollout (`prompt_ids`, `completion_ids`, `old_logprobs`) plus
the teacher's prompt: the student's chat messages with a context block (`recipe_config.context_template`, with
`{context}` in it) appended to the last user message, or sent as a new user message when the conversation ends
in a tool result. The training job appends the student's completion ids verbatim and runs the teacher pass
(`reef.training.distillation`).

`recipe_config.context_as: turn` shows the block as an earlier assistant answer instead (`with_context`), in
`recipe_config.context_turns` earlier exchanges (1 by default; at most `MAX_CONTEXT_TURNS`).

`recipe_config.teacher` (see `reef.training.teacher_spec`) is checked when the recipe is configured: a
model directory whose tokenizer is not the student's is refused naming `recipe_config.teacher`; a release or
scenario that does not exist is refused when the server starts (`Extensions.check_teacher`) and again at each
step.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from reef.core.errors import BadRequest, NotFound
from reef.core.settings import Settings
from reef.learning.base import Batch, Candidate, Extensions, TrainingJob
from reef.learning.growth import GrowContext, base_model_path, parent_adapter
from reef.learning.recipe_config import RecipeConfig
from reef.learning.surface import Surface
from reef.recipes.weights import ON_POLICY_WEIGHTS, WeightsRecipe
from reef.releases.base import ReleaseStore
from reef.training.jobfile import JobTeacher
from reef.training.teacher_spec import FIELD, TeacherSpec, parse_teacher, same_tokenizer

MAX_CONTEXT_TURNS = 8


def with_context(
    messages: list[dict[str, Any]], block: str, placement: str = "message", turns: int = 1
) -> list[dict[str, Any]]:
    """`messages` with `block` appended to the last user message, or as a new user message after a tool result.

    With `placement="turn"` the block is instead an earlier answer: the conversation, the block as the assistant's
    reply, then the last user message asked again, `turns` times over. A small model copies a shown answer far
    more readily than it follows one described in the question, and more readily the more often it has been shown:
    base SmolLM2 answers the demo's training prompts exactly 0.00 of the time when the answer is described in the
    message, 0.69 when shown once as a turn, 0.89 twice, 0.96 three times and 1.00 four times (70 prompts)."""
    teacher = copy.deepcopy(messages)
    last = teacher[-1] if teacher else None
    if last is None or last.get("role") != "user":
        return [*teacher, {"role": "user", "content": block.strip()}]
    if placement == "turn":
        shown = {"role": "assistant", "content": block.strip()}
        for _ in range(turns):
            teacher += [dict(shown), copy.deepcopy(last)]
        return teacher
    content = last.get("content")
    if isinstance(content, list):
        last["content"] = [*content, {"type": "text", "text": block}]
    else:
        last["content"] = f"{content or ''}{block}"
    return teacher


def text_field(value: Any) -> str | None:
    """A non-empty string, or a `{"content": str}` object's content; else None."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value.strip() else None


Divergence = Literal["forward_kl", "reverse_kl", "jsd", "sampled_reverse_kl"]


class DistillationConfig(RecipeConfig):
    """The teacher pass's settings, shared by the distillation recipes (each sets its own defaults)."""

    teacher: str = Field(
        "self",
        description="the teacher: `self` (the base, adapter off), `ema`, `release:<id>`, `scenario:<name>` or a "
        "model directory with the student's tokenizer",
    )
    divergence: Divergence = Field("forward_kl", description="the per-token divergence between student and teacher")
    context_template: str = Field(
        "\n\n{context}", description="how the context block is written; must hold `{context}`"
    )
    context_as: Literal["message", "turn"] = Field(
        "message", description="`message`: the block joins the prompt; `turn`: it is an earlier assistant answer"
    )
    context_turns: int = Field(
        1, ge=1, le=MAX_CONTEXT_TURNS, description="earlier exchanges that show the block (with `context_as: turn`)"
    )
    importance_cap: float = Field(
        2.0, ge=0, description="cap of the importance weight against the recorded log-probs (0: off)"
    )
    skip_first_tokens: int = Field(0, ge=0, description="completion tokens at the start of each sample left out")
    top_k: int = Field(0, ge=0, description="divergence over the student's top-k tokens and a tail (0: all)")
    jsd_beta: float = Field(0.5, ge=0, le=1, description="β of the generalized Jensen-Shannon divergence")
    ema_rate: float = Field(0.05, gt=0, le=1, description="update rate of the `ema` teacher's adapter")

    @field_validator("context_template")
    @classmethod
    def _holds_context(cls, template: str) -> str:
        if "{context}" not in template:
            raise ValueError("the context template must hold {context}")
        return template


class DistillationRecipe(WeightsRecipe):
    """A weights recipe trained by a teacher pass; subclasses add their processor and report schema."""

    surface: ClassVar[Surface] = ON_POLICY_WEIGHTS  # learns from its recorded rollouts
    recipe_config: DistillationConfig

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.teacher: TeacherSpec = parse_teacher(self.recipe_config.teacher)
        if self.teacher.kind == "path":
            student = base_model_path(settings)
            if not same_tokenizer(student, Path(self.teacher.name)):
                raise BadRequest(
                    f"the teacher at {self.teacher.name} does not share the student's tokenizer ({student})",
                    field=FIELD,
                )

    def context_block(self, context: str) -> str:
        return self.recipe_config.context_template.replace("{context}", context)

    def teacher_messages(self, messages: list[dict[str, Any]], context: str) -> list[dict[str, Any]]:
        """The teacher's prompt: `messages` with `context` placed by `context_template` and `context_as`."""
        config = self.recipe_config
        return with_context(messages, self.context_block(context), config.context_as, config.context_turns)

    def extensions(self) -> Extensions:
        return Extensions(check_teacher=self.check_teacher)

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        """Train `batch` with the teacher resolved (a release teacher's directory is read off the event loop)."""
        base = await asyncio.to_thread(base_model_path, ctx.settings)
        job = self.training_job(batch, base, parent_adapter(parent_dir), ctx.work_dir / "candidate")
        return await ctx.train(await asyncio.to_thread(self.with_teacher, job, ctx))

    def check_teacher(self, releases: ReleaseStore, scenarios: Iterable[str]) -> None:
        """Refuse (BadRequest naming `recipe_config.teacher`) a teacher release or scenario that does not exist."""
        self._teacher_release(releases, list(scenarios))

    def with_teacher(self, job: TrainingJob, ctx: GrowContext) -> TrainingJob:
        """The job with its teacher: `self`, `ema`, or the model directory a path, release or scenario names."""
        if self.teacher.kind == "self" or self.teacher.kind == "ema":
            teacher = JobTeacher(self.teacher.kind)
        elif self.teacher.kind == "path":
            teacher = JobTeacher("model", Path(self.teacher.name))
        else:
            if ctx.releases is None:
                raise BadRequest("a release teacher needs the release store", field=FIELD)
            release = self._teacher_release(
                ctx.releases, [ctx.scenario, *(info.name for info in ctx.records.scenarios())]
            )
            teacher = JobTeacher("model", ctx.releases.materialize(release))
        return dataclasses.replace(job, teacher=teacher)

    def _teacher_release(self, releases: ReleaseStore, scenarios: list[str]) -> Any:
        spec = self.teacher
        if spec.kind == "scenario":
            head = releases.head(spec.name)
            if head is None:
                raise BadRequest(f"the teacher scenario {spec.name!r} has no release", field=FIELD)
            return head
        if spec.kind != "release":
            return None
        for scenario in dict.fromkeys(scenarios):
            try:
                return releases.get(scenario, spec.name)
            except NotFound:
                continue
        raise BadRequest(f"no scenario has the teacher release {spec.name!r}", field=FIELD)
