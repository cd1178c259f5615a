"""The gate of an agent adapter: paired evaluation by running the agent itself (pi, Claude Code, Codex, opencode)
on the gate's tasks.

For each task the agent runs twice in sandboxed episodes, once with the candidate tree and once with the serving
tree, side by side (interleaved), against this Reef with the same model and sampling. A task's score is its check
(run in the episode root after the agent) and/or its answer checker on the agent's final answer (both must pass
when both are given). An episode that times out or whose agent fails is an **error**, not a 0: its pair is
dropped; when more than `harness.max_error_fraction` of the pairs are dropped, the evaluation fails closed.

Each episode's agent, exit status, duration, check and a pointer to its trajectory (a JSON file under
`<storage.dir>/episodes/<scenario>/`) go to the step's commit as `evaluation.episodes`. The episodes' model
requests go through this Reef's own `/v1`, each agent in its own dialect, with a token minted for that episode alone
(`reef.core.episode_tokens`): Reef tags their records `reef-episode` and counts their usage against the learner's
budget from that token. For an agent adapter Reef prepends no harness prompt, so what the agent sees is exactly the
tree it was given.

A request larger than the serving model's context fails every episode the same way: the first task's pair runs
alone, and when the model refused a prompt as too long the evaluation fails closed with `PromptTooLarge`,
naming the agent, the request's size and the model's context, before the other pairs run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.episode_tokens import EpisodeKey
from reef.core.errors import BadRequest
from reef.core.path_names import path_component
from reef.core.settings import Settings
from reef.harness.agents import AGENTS
from reef.harness.binding import ModelBinding
from reef.harness.directed import created_for_review
from reef.harness.episodes import AgentEpisodes, EpisodeResult
from reef.harness.tree import HarnessTree, load_tree
from reef.learning.base import Evaluator
from reef.learning.evaluation import Task, check
from reef.learning.evaluation.tasks import GateTasks
from reef.sandbox import SandboxRefused

log = logging.getLogger(__name__)

GateFor = Callable[[str], GateTasks]
ReleaseDir = Callable[[str, str | None], Path | None]
AGENT_EPISODES = frozenset(AGENTS)  # adapters whose agent the gate can run
# How an engine refuses a prompt it cannot hold, as the agent relays it: (request tokens, context tokens) from
# Reef's embedded engine (`reef.inference.local.request`), then (context, request) from an OpenAI-style server.
_TOO_LARGE = re.compile(r"the prompt has (\d+) tokens; the model's context is (\d+)")
_TOO_LARGE_OPENAI = re.compile(r"maximum context length is (\d+) tokens\. However, you requested (\d+) tokens")


class EpisodeErrors(RuntimeError):
    """Too many episodes ended in errors for the gate to judge: it fails closed."""


class PromptTooLarge(EpisodeErrors):
    """The agent's request does not fit the serving model's context: no episode of this agent can be judged."""


def agent_adapter(settings: Settings) -> str | None:
    """The scenario adapter whose agent the gate runs (`harness.default_adapter`), or None for system-prompt
    evaluation (`chat`, `harness.gate: chat`, or an adapter whose agent Reef cannot run yet)."""
    adapter = settings.harness.default_adapter
    if settings.harness.gate == "chat" or adapter not in AGENT_EPISODES:
        return None
    if not AgentEpisodes.available(adapter):
        raise BadRequest(
            f"the gate of adapter {adapter!r} runs its agent, but `{adapter}` is not on PATH; install it or set "
            "harness.gate to chat",
            field="harness.default_adapter",
        )
    return adapter


def binding_for(settings: Settings, scenario: str) -> ModelBinding:
    """This Reef as the episodes' model endpoint (its own address, served model). Each episode gets a token of its
    own as it starts, signed with the deployment's episode key, that reaches only `scenario`'s `/v1/*` and expires
    with the episode (`reef.core.episode_tokens`), with or without configured tokens."""
    host = settings.reef.host if settings.reef.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    model = settings.inference.served_model_name or settings.inference.upstream_model or "reef"
    key = EpisodeKey.for_settings(settings)
    return ModelBinding(
        f"http://{host}:{settings.reef.port}",
        scenario,
        model,
        max_tokens=settings.harness.episode_max_tokens or settings.evaluation.max_new_tokens,
        mint=lambda episode_id, ttl_s: key.mint(scenario, episode_id, ttl_s),
    )


class AgentEvaluator(Evaluator):
    """Paired scores from agent episodes (candidate tree vs serving tree) on the scenario's gate tasks."""

    uses_gate_tasks = True
    runs_agent = True

    def __init__(
        self,
        settings: Settings,
        gate_for: GateFor,
        release_dir: ReleaseDir,
        episodes: AgentEpisodes | None = None,
        binding_for_scenario: Callable[[str], ModelBinding] | None = None,
    ) -> None:
        self.settings = settings
        self._gate_for = gate_for
        self._release_dir = release_dir
        self.episodes = episodes or AgentEpisodes.from_settings(settings, settings.harness.default_adapter)
        self._binding_for = binding_for_scenario or (lambda scenario: binding_for(settings, scenario))
        self._details: dict[str, dict[str, Any]] = {}

    def blocker(self) -> str | None:
        """`sandbox: …` when the episodes may not run here (no isolating sandbox, not allowed unsandboxed)."""
        try:
            self.episodes.sandboxed()
        except SandboxRefused as refused:
            return f"sandbox: {refused}"
        return None

    def details(self, scenario: str) -> dict[str, Any] | None:
        """The last evaluation of `scenario`: every episode and the dropped pairs (for the step's commit)."""
        return self._details.pop(scenario, None)

    async def paired_scores(
        self, scenario: str, candidate_path: Path | None, current_release_id: str | None
    ) -> tuple[list[float], list[float]]:
        tasks = self._gate_for(scenario).tasks
        current_dir = await asyncio.to_thread(self._release_dir, scenario, current_release_id)
        current = load_tree(current_dir) if current_dir is not None else HarnessTree()
        candidate = load_tree(candidate_path) if candidate_path is not None else current
        unreviewed = created_for_review(current, candidate)
        if unreviewed and not self.episodes.sandboxed():
            # Model-written code runs only inside an isolating sandbox, whatever sandbox.allow_unsandboxed says.
            raise SandboxRefused(
                f"the candidate holds unreviewed nodes that run or permit things {unreviewed}: they are gated only "
                "inside an isolating sandbox (bubblewrap), even with sandbox.allow_unsandboxed"
            )
        evaluation_id = uuid.uuid4().hex[:12]

        async def pair(task: Task) -> tuple[EpisodeResult, EpisodeResult]:
            candidate_run, current_run = await asyncio.gather(
                self._episode(scenario, evaluation_id, "candidate", candidate, task),
                self._episode(scenario, evaluation_id, "current", current, task),
            )
            return candidate_run, current_run

        runs = [await pair(tasks[0])] if tasks else []
        self._refuse_too_large(runs)
        runs += await asyncio.gather(*(pair(task) for task in tasks[1:]))
        candidate_scores: list[float] = []
        current_scores: list[float] = []
        episodes: list[dict[str, Any]] = []
        dropped: list[str] = []
        for task, (candidate_run, current_run) in zip(tasks, runs, strict=True):
            scores = []
            for side, run in (("candidate", candidate_run), ("current", current_run)):
                score = None if run.error else score_episode(task, run)
                scores.append(score)
                episodes.append(self._describe(scenario, evaluation_id, task, side, run, score))
            if scores[0] is None or scores[1] is None:
                dropped.append(task.task_id)
                continue
            candidate_scores.append(scores[0])
            current_scores.append(scores[1])
        self._details[scenario] = {
            "agent": self.episodes.agent.name,
            "agent_version": self.episodes.agent.installed_version(self.episodes.binary),
            "episodes": episodes,
            "dropped_pairs": dropped,
        }
        allowed = self.settings.harness.max_error_fraction * len(tasks)
        if len(dropped) > allowed or not candidate_scores:
            raise EpisodeErrors(
                f"{len(dropped)} of {len(tasks)} episode pairs ended in errors (harness.max_error_fraction "
                f"{self.settings.harness.max_error_fraction:g}); failing closed"
            )
        return candidate_scores, current_scores

    def _refuse_too_large(self, runs: list[tuple[EpisodeResult, EpisodeResult]]) -> None:
        """Fail closed when the model refused an episode's prompt as larger than its context."""
        for run in (run for pair in runs for run in pair):
            said = json.dumps(run.trajectory) + run.stderr_tail if run.error else ""
            ours, openai = _TOO_LARGE.search(said), _TOO_LARGE_OPENAI.search(said)
            if ours:
                tokens, context = ours.groups()
            elif openai:
                context, tokens = openai.groups()
            else:
                continue
            raise PromptTooLarge(
                f"agent {self.episodes.agent.name!r} sent a request of {tokens} tokens; the serving model's "
                f"context is {context} tokens: serve a model with a larger context or set harness.gate to chat"
            )

    async def _episode(
        self, scenario: str, evaluation_id: str, side: str, tree: HarnessTree, task: Task
    ) -> EpisodeResult:
        base = self._binding_for(scenario)
        binding = dataclasses.replace(
            base,
            max_tokens=task.extra.get("max_tokens") or base.max_tokens,
            episode_id=f"{evaluation_id}-{task.task_id}-{side}",
        )
        prompt = str(task.messages[-1].get("content", ""))
        return await self.episodes.run(tree, prompt, binding, task.workspace, task.check)

    def _describe(
        self, scenario: str, evaluation_id: str, task: Task, side: str, run: EpisodeResult, score: float | None
    ) -> dict[str, Any]:
        trajectory = self._store_trajectory(scenario, f"{evaluation_id}-{task.task_id}-{side}", run)
        return {
            "task_id": task.task_id,
            "side": side,
            "agent": self.episodes.agent.name,
            "exit_status": run.exit_code,
            "timed_out": run.timed_out,
            "error": run.error,
            "score": score,
            "duration_s": round(run.duration_s, 3),
            "sandboxed": run.sandboxed,
            "check": None if run.check is None else {"passed": run.check.passed, "detail": run.check.detail[-500:]},
            "trajectory": trajectory,
        }

    def _store_trajectory(self, scenario: str, episode_id: str, run: EpisodeResult) -> str:
        """Write the trajectory under the storage directory; the pointer is its path relative to it."""
        root = Path(self.settings.storage.dir).expanduser()
        relative = Path("episodes") / path_component(scenario, "scenario") / f"{path_component(episode_id)}.json"
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"events": run.trajectory, "answer": run.answer, "stderr_tail": run.stderr_tail}
        path.write_text(json.dumps(body, default=str), encoding="utf-8")
        return relative.as_posix()


def score_episode(task: Task, run: EpisodeResult) -> float:
    """The check's verdict and/or the answer checker's score (both must pass when both are given)."""
    score = 1.0
    if task.check is not None:
        score = 1.0 if run.check is not None and run.check.passed else 0.0
    if task.checker != "none":
        score *= check(task, run.answer)
    return score
