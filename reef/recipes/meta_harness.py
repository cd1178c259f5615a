"""`meta_harness`: full-history population search over whole harness compositions (Meta-Harness).

The population (`state/meta_harness.json`, committed with each release) holds every retained candidate: its id,
its complete composition (nodes), its parent, its paired gate scores (its mean and the incumbent's on the same
batch) and a few traces of the step that made it. Each step:
1. gather the population: the release's state, plus the candidates of later steps the gate did not publish (read
   back from the commit log, where each step names its candidate) — so a non-winner stays a future parent and a
   restart resumes the search where it was;
2. the proposer sees every retained candidate (composition, scores, parent, traces) and answers with a parent id
   and a complete composition; an unusable answer falls back to the best-scoring candidate plus the step's
   failing examples as memory items;
3. the learner's gate judges the child against the serving release on the same paired batch, and policy `mean`
   (the recipe's selector, margin 0) publishes only on a strict mean gain.
The population is bounded by `recipe_config.max_candidates` (the incumbent and the best means are kept).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from reef.core.errors import BadRequest
from reef.harness.admission import admit_tree
from reef.harness.mutations import apply_mutations, diff_trees
from reef.harness.proposer import parse_json_reply
from reef.harness.reply_schema import COMPOSITION_REPLY, COMPOSITION_SCHEMA, reply_max_tokens
from reef.harness.traces import is_failure, question_of
from reef.harness.tree import HarnessTree, tree_from_json
from reef.learning.base import GatePolicy
from reef.learning.evaluation.selectors import MeanImprovement
from reef.recipes.harness_method import (
    HarnessConfig,
    HarnessRecipe,
    StepInput,
    StepOutput,
    describe_ledger,
    fallback_mutations,
)

METHOD = "meta_harness"
TRACES_PER_CANDIDATE = 3
PROPOSE = (
    "You improve an AI assistant's harness by searching over whole compositions. Below is every candidate tried "
    "so far: its id, parent, nodes and gate scores. Pick the most promising parent and write a complete new "
    'composition. Reply with JSON only: {"parent": "<candidate id>", "nodes": [{"kind": "rules", "text": "..."}, '
    '{"kind": "memory", "text": "Q: ...\\nA: ..."}]}.'
)


class PopulationGate(MeanImprovement):
    """A strict mean gain over the incumbent on the same paired batch publishes; anything else is rejected (never
    kept as the lineage's tip: a non-winner lives on in the population instead)."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def lost(self, candidate: Sequence[float], current: Sequence[float]) -> bool:
        return True


def candidate_id(tree: HarnessTree) -> str:
    return "cand-" + hashlib.sha256(json.dumps(tree.to_json()["nodes"], sort_keys=True).encode()).hexdigest()[:10]


def mean(scores: list[float]) -> float | None:
    return sum(scores) / len(scores) if scores else None


class MetaHarnessConfig(HarnessConfig):
    """`learning.recipe_config` of the `meta_harness` harness method."""

    proposer_max_tokens: int = Field(300, ge=1, description="the proposer's completion budget per call")
    max_candidates: int = Field(8, ge=2, description="candidates the population keeps (incumbent and best means stay)")


class MetaHarness(HarnessRecipe):
    """Population search: the proposer sees the full history and returns (parent id, complete composition)."""

    name = METHOD
    config_model: ClassVar[type[MetaHarnessConfig]] = MetaHarnessConfig
    recipe_config: MetaHarnessConfig

    def gate(self) -> GatePolicy:
        """The harness gate, judged by the population's own policy."""
        return dataclasses.replace(super().gate(), selector=PopulationGate())

    async def step(self, given: StepInput) -> StepOutput:
        population = self.population(given)
        failing = [t for t in given.traces if is_failure(t) and question_of(t)][:TRACES_PER_CANDIDATE]
        traces = [{"question": question_of(t)[:200], "answer": str(t.get("answer", ""))[:120]} for t in failing]
        reply = await given.proposer.complete(
            [
                {"role": "system", "content": PROPOSE},
                {"role": "user", "content": self.history_prompt(given, population)},
            ],
            max_tokens=reply_max_tokens(COMPOSITION_SCHEMA, self.recipe_config.proposer_max_tokens),
            response_format=COMPOSITION_REPLY,
        )
        chosen = self.parse_reply(reply, population)
        source = "proposer"
        if chosen is None:  # the best candidate so far, plus this step's failures as worked examples
            parent = max(population, key=_mean_or_unscored)
            base = tree_from_json(parent["nodes"])
            child = apply_mutations(base, fallback_mutations(base, given.traces)) if given.traces else base
            chosen, source = (parent["id"], child), "fallback"
        parent_id, child = chosen
        child_id = candidate_id(child)
        if all(c["id"] != child_id for c in population):
            population.append(
                {"id": child_id, "parent": parent_id, "nodes": child.to_json()["nodes"], "mean": None, "traces": traces}
            )
        retained = self.bounded(population, given.tree)
        state = {"steps": int(given.state.get("steps", 0)) + 1, "population": retained}
        notes: dict[str, Any] = {"parent": parent_id, "candidate_id": child_id, "population": len(retained)}
        notes["candidate"] = {"id": child_id, "parent": parent_id, "nodes": child.to_json()["nodes"], "traces": traces}
        notes["proposer_reply"] = reply[:600]
        return StepOutput(diff_trees(given.tree, child), state, notes, source, fallback=False)

    def population(self, given: StepInput) -> list[dict[str, Any]]:
        """The release's population, the incumbent, and every later candidate the commit log names, with scores."""
        population: list[dict[str, Any]] = [dict(c) for c in given.state.get("population", [])]
        known = {c["id"]: c for c in population}
        head_id = candidate_id(given.tree)
        if head_id not in known:
            head = {"id": head_id, "parent": None, "nodes": given.tree.to_json()["nodes"], "mean": None, "traces": []}
            population.append(head)
            known[head_id] = head
        for commit in given.commits:
            metrics = commit.metrics or {}
            made = metrics.get("candidate") if metrics.get("method") == METHOD else None
            if not isinstance(made, dict) or "id" not in made:
                continue
            entry = known.get(made["id"])
            if entry is None:
                entry = {**made, "mean": None}
                population.append(entry)
                known[made["id"]] = entry
            if commit.candidate_scores:
                entry["mean"] = mean(list(commit.candidate_scores))
                entry["incumbent_mean"] = mean(list(commit.current_scores))
                entry["verdict"] = commit.verdict
        return population

    def bounded(self, population: list[dict[str, Any]], head: HarnessTree) -> list[dict[str, Any]]:
        limit = self.recipe_config.max_candidates
        head_id = candidate_id(head)
        ranked = sorted(population, key=lambda c: (c["id"] != head_id, -(c.get("mean") or 0.0)))
        return json.loads(json.dumps(ranked[:limit]))

    def history_prompt(self, given: StepInput, population: list[dict[str, Any]]) -> str:
        lines = []
        for entry in population:
            scores = "not yet scored"
            if entry.get("mean") is not None:
                scores = (
                    f"mean {entry['mean']:.2f} (incumbent {entry.get('incumbent_mean', 0.0):.2f} on the same batch)"
                )
            lines.append(f"Candidate {entry['id']} (parent {entry.get('parent') or 'none'}; {scores}):")
            for node in entry["nodes"][:12]:
                lines.append(f"  - {node['kind']}: {str(node['config'].get('text', ''))[:160]!r}")
            for trace in entry.get("traces", [])[:TRACES_PER_CANDIDATE]:
                lines.append(f"  trace: {trace['question']!r} -> {trace['answer']!r}")
        failing = [t for t in given.traces if is_failure(t)][:TRACES_PER_CANDIDATE]
        if failing:
            lines.append("Failed just now:")
            for trace in failing:
                expected = f" (correct: {trace['expected']})" if trace.get("expected") is not None else ""
                lines.append(f"  - {question_of(trace)[:200]!r}{expected}")
        lines += ["Rejected before:", describe_ledger(given.ledger)]
        return "\n".join(lines)

    def parse_reply(self, reply: str, population: list[dict[str, Any]]) -> tuple[str, HarnessTree] | None:
        """(parent id, child tree) from the proposer's JSON, or None when it names no known parent or no nodes."""
        parsed = parse_json_reply(reply)
        if not isinstance(parsed, dict) or parsed.get("parent") not in {c["id"] for c in population}:
            return None
        nodes = parsed.get("nodes")
        if not isinstance(nodes, list) or not nodes:
            return None
        built = []
        for i, node in enumerate(nodes):
            if not isinstance(node, dict):
                return None
            kind = node.get("kind", "rules")
            config = (
                node.get("config")
                if isinstance(node.get("config"), dict)
                else {k: v for k, v in node.items() if k not in ("id", "kind")}
            )
            digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:8]
            built.append({"id": str(node.get("id") or f"meta-{i}-{digest}"), "kind": kind, "config": config})
        try:
            return str(parsed["parent"]), admit_tree(tree_from_json({"nodes": built}))
        except BadRequest:
            return None


def _mean_or_unscored(entry: dict[str, Any]) -> float:
    return float(entry["mean"]) if entry.get("mean") is not None else -1.0


RECIPE = MetaHarness
