"""Paired evaluation on held-out tasks through the engine (never recorded: it bypasses the service).

The candidate and the serving release answer the same tasks with the same sampling; each task's two requests
go out together, so any drift in the engine (load, batching) hits both sides alike. Held-out scored rollouts
(the gate of score-only feedback, `ranking`) add one paired score per pair of them.

With `evaluation.scoring` `likelihood` nothing is generated: a side's score on a task is

    exp( (1/n) · Σ_i log p(y_i | prompt, y_<i) ),   y = the task's `answer` tokenized, then end of sequence,

the geometric-mean probability per token of saying exactly the known answer and stopping. It is continuous, so
a step that moves the model towards the answers shows on a few tasks where a greedy answer may not change yet.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.errors import BadRequest
from reef.core.scenarios import Dialect
from reef.core.settings import Settings
from reef.inference.base import Engine, RequestContext
from reef.learning.base import Evaluator
from reef.learning.evaluation.checkers import check
from reef.learning.evaluation.ranking import paired_ranking_scores
from reef.learning.evaluation.tasks import GateTasks, Task, load_tasks

log = logging.getLogger(__name__)

ContextFor = Callable[[str, str | None], RequestContext]
CandidatePrompt = Callable[[Path], tuple[str | None, tuple[tuple[str, str], ...]]]  # (system prompt, example turns)
GateFor = Callable[[str], GateTasks]


class TaskEvaluator(Evaluator):
    """Scores candidate and current release on a scenario's gate tasks with their checkers."""

    uses_gate_tasks = True  # the learner waits while a scenario has too few of them

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        context_for: ContextFor | None = None,
        candidate_prompt: CandidatePrompt | None = None,
        max_parallel_tasks: int = 4,
        gate_for: GateFor | None = None,
    ) -> None:
        if settings.evaluation.scoring == "likelihood" and not engine.scores_completions:
            raise BadRequest(
                f"evaluation.scoring 'likelihood' needs an engine that scores completions (the local one); "
                f"{type(engine).__name__} cannot: use 'checker'",
                "evaluation.scoring",
            )
        self.engine = engine
        self.settings = settings
        self._context_for = context_for or (lambda scenario, release_id: RequestContext(scenario, release_id))
        self._candidate_prompt = candidate_prompt or (lambda path: (None, ()))
        self._max_parallel_tasks = max_parallel_tasks
        self._gate_for = gate_for or (
            lambda scenario: GateTasks("file", load_tasks(settings.evaluation.tasks, scenario))
        )

    def tasks(self, scenario: str) -> list[Task]:
        """The gate tasks of `scenario` (by default `evaluation.tasks`, re-read each time so it can be edited)."""
        return self._gate_for(scenario).tasks

    async def paired_scores(
        self, scenario: str, candidate_path: Path | None, current_release_id: str | None
    ) -> tuple[list[float], list[float]]:
        gate = self._gate_for(scenario)
        current_ctx = self._context_for(scenario, current_release_id)
        prompt, turns = (
            self._candidate_prompt(candidate_path)
            if candidate_path
            else (current_ctx.system_prompt, current_ctx.example_turns)
        )
        candidate_ctx = RequestContext(
            scenario,
            release_id=current_release_id,
            candidate_path=candidate_path,
            system_prompt=prompt,
            example_turns=turns,
        )
        limit = asyncio.Semaphore(self._max_parallel_tasks)

        async def pair(task: Task) -> tuple[float, float]:
            async with limit:
                candidate, current = await asyncio.gather(
                    self._score(task, candidate_ctx), self._score(task, current_ctx)
                )
                return candidate, current

        pairs = await asyncio.gather(*(pair(task) for task in gate.tasks))
        candidate_scores, current_scores = [c for c, _ in pairs], [k for _, k in pairs]
        ranking = gate.pairs
        if ranking:  # held-out scored rollouts: one paired score per pair, after the tasks'
            ranked = await paired_ranking_scores(
                self.engine, ranking, candidate_ctx, current_ctx, self._max_parallel_tasks
            )
            candidate_scores += ranked[0]
            current_scores += ranked[1]
        return candidate_scores, current_scores

    async def _score(self, task: Task, ctx: RequestContext) -> float:
        if self.settings.evaluation.scoring == "likelihood":
            return await self._likelihood(task, ctx)
        completion = await self.engine.complete(Dialect.CHAT, self._body(task), ctx)
        if completion.status >= 400:
            raise RuntimeError(f"task {task.task_id}: the engine answered {completion.status}")
        return check(task, answer_text(completion.body))

    async def _likelihood(self, task: Task, ctx: RequestContext) -> float:
        """The geometric-mean token probability of `task.answer` and end of sequence under `ctx` (see the module)."""
        if task.answer is None:
            raise ValueError(f"task {task.task_id} has no answer for evaluation.scoring 'likelihood' to score")
        logprobs = await self.engine.score_answer(self._body(task), str(task.answer), ctx)
        return math.exp(sum(logprobs) / len(logprobs))

    def _body(self, task: Task) -> dict[str, Any]:
        inference = self.settings.inference
        evaluation = self.settings.evaluation
        return {
            "model": inference.served_model_name or inference.upstream_model or "reef",
            "messages": [dict(message) for message in task.messages],
            "max_tokens": task.extra.get("max_tokens") or evaluation.max_new_tokens,
            "temperature": evaluation.temperature,
            "stream": False,
        }


def answer_text(body: dict[str, Any]) -> str:
    """The assistant text of a chat completion body (string or list-of-parts content)."""
    content = body["choices"][0]["message"].get("content") or ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)
