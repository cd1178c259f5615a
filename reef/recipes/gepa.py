"""`gepa`: reflective evolution with a per-task score archive and Pareto-front parent sampling (GEPA).

State (kept in the release, `state/gepa.json`): the training tasks seen so far (traces whose feedback names
the correct answer), and an archive of candidate trees with their per-task scores. Each step:
1. sample a parent from the Pareto front (candidates best on at least one task, weighted by how many);
2. score the parent on a minibatch of tasks and reflect on its failures (proposer, else failing tasks as
   worked examples) to make a child;
3. accept the child only if it is strictly better than the parent on the same minibatch; otherwise the step's
   candidate is the unchanged head (which the gate then rejects).
The held-out evaluation tasks are never shown to the proposer: minibatches come from traffic only.

Why not the `gepa` PyPI package (0.1.4): `gepa.optimize` owns the whole search loop (budgeted by metric calls,
state in its run directory, candidates as `dict[str, str]`), while Reef runs one step per learner batch with
state in the release, typed nodes behind admission, and the learner's paired gate as the final judge. The
sampling and acceptance rules are a few dozen lines, written here on Reef's contracts.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, ClassVar

from pydantic import Field

from reef.harness.mutations import Mutation, coerce_mutations, diff_trees
from reef.harness.proposer import parse_json_reply
from reef.harness.reply_schema import NODES_REPLY, NODES_SCHEMA, reply_max_tokens
from reef.harness.scoring import score_tree, task_from_trace
from reef.harness.tree import HarnessTree, Node, tree_from_json
from reef.learning.evaluation import Task
from reef.recipes.harness_method import (
    HarnessConfig,
    HarnessRecipe,
    StepInput,
    StepOutput,
    apply_admissible,
    describe_ledger,
    example_text,
)

MAX_TASKS = 64
MAX_ARCHIVE = 12
REFLECT = (
    "You improve an AI assistant's instructions. It failed the tasks below. Reply with a JSON list of new "
    'instructions or worked examples only, e.g. [{"kind": "rules", "text": "..."}, {"kind": "memory", '
    '"text": "Q: ...\\nA: ..."}].'
)


def tree_id(tree: HarnessTree) -> str:
    return hashlib.sha256(tree.dumps().encode()).hexdigest()[:12]


def pareto_front(archive: list[dict[str, Any]]) -> dict[str, int]:
    """Candidate id -> number of tasks on which it holds the best score (ties count for each holder)."""
    best: dict[str, float] = {}
    for entry in archive:
        for task, score in entry["scores"].items():
            best[task] = max(best.get(task, float("-inf")), score)
    counts: dict[str, int] = {}
    for entry in archive:
        wins = sum(1 for task, score in entry["scores"].items() if score >= best[task])
        if wins:
            counts[entry["id"]] = wins
    return counts


def sample_parent(archive: list[dict[str, Any]], rng: random.Random) -> dict[str, Any] | None:
    """A parent drawn from the Pareto front, weighted by the tasks it leads on."""
    front = pareto_front(archive)
    if not front:
        return None
    ids = sorted(front)
    chosen = rng.choices(ids, weights=[front[i] for i in ids])[0]
    return next(entry for entry in archive if entry["id"] == chosen)


class GepaConfig(HarnessConfig):
    """`learning.recipe_config` of the `gepa` harness method."""

    proposer_max_tokens: int = Field(160, ge=1, description="the proposer's completion budget per call")
    minibatch_size: int = Field(3, ge=1, description="tasks in one reflection minibatch")


class Gepa(HarnessRecipe):
    """Pareto-front parent sampling, minibatch reflection, strict acceptance."""

    name = "gepa"
    config_model: ClassVar[type[GepaConfig]] = GepaConfig
    recipe_config: GepaConfig

    async def step(self, given: StepInput) -> StepOutput:
        state: dict[str, Any] = {
            "tasks": list(given.state.get("tasks", [])),
            "archive": list(given.state.get("archive", [])),
            "steps": int(given.state.get("steps", 0)) + 1,
        }
        _remember_tasks(state, given.traces)
        tasks = {t["id"]: Task(t["id"], t["messages"], t["checker"], t["answer"]) for t in state["tasks"]}
        head_id = tree_id(given.tree)
        if not any(entry["id"] == head_id for entry in state["archive"]):
            state["archive"].append({"id": head_id, "nodes": given.tree.to_json()["nodes"], "scores": {}})
        rng = random.Random(f"{given.ctx.scenario}:{given.ctx.step}")
        parent_entry = sample_parent(state["archive"], rng) or _entry(state, head_id)
        parent = tree_from_json(parent_entry["nodes"])
        minibatch_ids = rng.sample(sorted(tasks), min(self.recipe_config.minibatch_size, len(tasks)))
        notes: dict[str, Any] = {"parent": parent_entry["id"], "minibatch": minibatch_ids}
        if not minibatch_ids:
            notes["accepted_on_minibatch"] = False
            return StepOutput([], _trim(state), {**notes, "why": "no task with a known answer yet"}, "gepa", False)
        minibatch = [tasks[i] for i in minibatch_ids]
        parent_scores = await self._score(given, parent, minibatch)
        parent_entry["scores"].update(dict(zip(minibatch_ids, parent_scores, strict=True)))
        failed = [task for task, score in zip(minibatch, parent_scores, strict=True) if score < 1.0]
        children = [await self._reflect(given, parent, failed), _examples(parent, failed)]
        notes["parent_scores"] = parent_scores
        for source, mutations in zip(("proposer", "fallback"), children, strict=True):
            child, applied, _ = apply_admissible(parent, mutations)
            if not applied:
                continue
            child_scores = await self._score(given, child, minibatch)
            notes[f"{source}_child_scores"] = child_scores
            if sum(child_scores) > sum(parent_scores):  # strictly better on the same minibatch
                entry = {"id": tree_id(child), "nodes": child.to_json()["nodes"], "scores": {}}
                entry["scores"].update(dict(zip(minibatch_ids, child_scores, strict=True)))
                state["archive"].append(entry)
                notes["accepted_on_minibatch"] = True
                return StepOutput(diff_trees(given.tree, child), _trim(state), notes, source)
        notes["accepted_on_minibatch"] = False
        # No strictly better child: offer the Pareto parent itself when it differs from the head.
        return StepOutput(diff_trees(given.tree, parent), _trim(state), notes, "gepa", False)

    async def _score(self, given: StepInput, tree: HarnessTree, tasks: list[Task]) -> list[float]:
        settings = given.ctx.settings
        model = settings.inference.served_model_name or settings.inference.upstream_model or "reef"
        return await score_tree(
            given.ctx.engine,
            given.ctx.scenario,
            tree,
            tasks,
            model=model,
            max_new_tokens=settings.evaluation.max_new_tokens,
        )

    async def _reflect(self, given: StepInput, parent: HarnessTree, failed: list[Task]) -> list[Mutation]:
        if not failed:
            return []
        lines = ["Failed tasks:"] + [f"- {t.messages[-1]['content'][:200]} (correct: {t.answer})" for t in failed]
        lines += ["Rejected before:", describe_ledger(given.ledger)]
        reply = await given.proposer.complete(
            [{"role": "system", "content": REFLECT}, {"role": "user", "content": "\n".join(lines)}],
            max_tokens=reply_max_tokens(NODES_SCHEMA, self.recipe_config.proposer_max_tokens),
            response_format=NODES_REPLY,
        )
        return coerce_mutations(parse_json_reply(reply), id_prefix="gepa")


def _examples(parent: HarnessTree, failed: list[Task]) -> list[Mutation]:
    existing = {node.text for node in parent.of_kind("memory")}
    found = []
    for task in failed:
        text = example_text({"messages": task.messages, "expected": task.answer})
        if text not in existing:
            digest = hashlib.sha256(text.encode()).hexdigest()[:10]
            found.append(Mutation.create(Node(f"gepa-{digest}", "memory", {"text": text, "tags": ["example"]})))
    return found


def _remember_tasks(state: dict[str, Any], traces: list[dict[str, Any]]) -> None:
    known = {t["id"] for t in state["tasks"]}
    for trace in traces:
        task = task_from_trace(trace)
        if task is not None and task.task_id not in known:
            known.add(task.task_id)
            state["tasks"].append(
                {"id": task.task_id, "messages": task.messages, "checker": task.checker, "answer": task.answer}
            )
    state["tasks"] = state["tasks"][-MAX_TASKS:]


def _entry(state: dict[str, Any], candidate_id: str) -> dict[str, Any]:
    return next(entry for entry in state["archive"] if entry["id"] == candidate_id)


def _trim(state: dict[str, Any]) -> dict[str, Any]:
    # Keep the Pareto front first, then the newest, so the archive stays small inside the release.
    front = pareto_front(state["archive"])
    archive = sorted(state["archive"], key=lambda e: (e["id"] not in front,))[:MAX_ARCHIVE]
    return json.loads(json.dumps({**state, "archive": archive}))


RECIPE = Gepa
