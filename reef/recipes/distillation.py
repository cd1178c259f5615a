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
scenario that does not exist is refused when the server starts (`check_teacher`) and again at each step.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from reef.core.capabilities import Capability
from reef.core.errors import BadRequest, NotFound
from reef.core.settings import Settings
from reef.learning.base import TrainingJob
from reef.learning.growth import GrowContext, base_model_path
from reef.recipes.weights import ON_POLICY_NEEDS, WeightsRecipe
from reef.releases.base import ReleaseStore
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


class DistillationRecipe(WeightsRecipe):
    """A weights recipe trained by a teacher pass; subclasses add their processor and report schema."""

    needs: ClassVar[frozenset[Capability]] = ON_POLICY_NEEDS  # learns from its recorded rollouts

    default_teacher: ClassVar[str] = "self"
    default_divergence: ClassVar[str] = "forward_kl"
    default_template: ClassVar[str] = "\n\n{context}"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.teacher: TeacherSpec = parse_teacher(self.config()["teacher"])
        if self.teacher.kind == "path":
            student = base_model_path(settings)
            if not same_tokenizer(student, Path(self.teacher.name)):
                raise BadRequest(
                    f"the teacher at {self.teacher.name} does not share the student's tokenizer ({student})",
                    field=FIELD,
                )
        template = self.config()["context_template"]
        if not isinstance(template, str) or "{context}" not in template:
            raise BadRequest(
                "the context template must be a string holding {context}", field="recipe_config.context_template"
            )
        if self.config()["context_as"] not in ("message", "turn"):
            raise BadRequest("context_as is 'message' or 'turn'", field="recipe_config.context_as")
        turns = self.config()["context_turns"]
        if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_CONTEXT_TURNS:
            raise BadRequest(
                f"context_turns is a whole number from 1 to {MAX_CONTEXT_TURNS}", field="recipe_config.context_turns"
            )

    def config(self) -> dict[str, Any]:
        base = {
            "teacher": self.default_teacher,
            "divergence": self.default_divergence,
            "context_template": self.default_template,
            "context_as": "message",
            "context_turns": 1,
            "importance_cap": 2.0,
            "skip_first_tokens": 0,
            "top_k": 0,
            "jsd_beta": 0.5,
            "ema_rate": 0.05,
        }
        return {**base, **super().config()}

    def context_block(self, context: str) -> str:
        return str(self.config()["context_template"]).replace("{context}", context)

    def teacher_messages(self, messages: list[dict[str, Any]], context: str) -> list[dict[str, Any]]:
        """The teacher's prompt: `messages` with `context` placed by `context_template` and `context_as`."""
        config = self.config()
        return with_context(
            messages, self.context_block(context), str(config["context_as"]), int(config["context_turns"])
        )

    def check_teacher(self, releases: ReleaseStore, scenarios: Iterable[str]) -> None:
        """Refuse (BadRequest naming `recipe_config.teacher`) a teacher release or scenario that does not exist."""
        self._teacher_release(releases, list(scenarios))

    def prepare_job(self, job: TrainingJob, ctx: GrowContext) -> TrainingJob:
        """The job with the teacher named by kind (`self`, `ema`) or resolved to a directory (`teacher_path`)."""
        config = {**job.config, "teacher": self.teacher.kind}
        if self.teacher.kind == "path":
            config["teacher_path"] = self.teacher.name
        elif self.teacher.needs_directory:
            if ctx.releases is None:
                raise BadRequest("a release teacher needs the release store", field=FIELD)
            release = self._teacher_release(
                ctx.releases, [ctx.scenario, *(info.name for info in ctx.records.scenarios())]
            )
            config["teacher_path"] = str(ctx.releases.materialize(release))
            config["teacher_release_id"] = release.release_id
        return dataclasses.replace(job, config=config)

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
