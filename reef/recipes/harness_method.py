"""`HarnessRecipe`: what every harness method shares — the seed tree, the trace processor, and one growth step.

A step: read the parent tree and the method's state, collect the rejection ledger and queued agent proposals,
ask the method for mutations, apply them atomically (falling back to deterministic memory items when the
proposer's answer is unusable), and write the candidate directory. The learner then evaluates the candidate
paired against the serving release with the scenario's evaluation gate and publishes or rejects it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from reef.core.errors import BadRequest, ReefError
from reef.harness.agent_gate import AgentEvaluator, agent_adapter
from reef.harness.catalog import load_adapter
from reef.harness.chat import chat_harness_for
from reef.harness.directed import created_for_review, directed_mutations, instruction_rule
from reef.harness.mutations import Mutation, apply_mutations, parse_mutations
from reef.harness.proposals import ProposalQueue
from reef.harness.proposer import Proposer, open_proposer
from reef.harness.render import write_tree
from reef.harness.traces import TraceProcessor, is_failure, question_of
from reef.harness.tree import HarnessTree, Node, load_tree
from reef.learning.base import Batch, Candidate, Evaluator, Extensions, GatePolicy, GrowContext, Processor, Recipe
from reef.learning.recipe_config import RecipeConfig
from reef.learning.report import Metadata, Report, ReportTaker
from reef.learning.surface import HARNESS, ServingPrompt, Surface

log = logging.getLogger(__name__)

STATE_DIR = "state"
DEFAULT_RULES = "Answer the user's question. Reply with only the answer, no explanation."
MAX_QUESTION_CHARS = 300


@dataclasses.dataclass(frozen=True)
class StepInput:
    """What a method sees in one step."""

    tree: HarnessTree
    traces: list[dict[str, Any]]
    state: dict[str, Any]
    ledger: list[dict[str, Any]]
    proposer: Proposer
    ctx: Any  # reef.learning.growth.GrowContext
    instruction: str | None = None  # an operator's words (POST /reef/train text): a directed step
    commits: list[Any] = dataclasses.field(default_factory=list)  # the scenario's step log, oldest first


@dataclasses.dataclass(frozen=True)
class StepOutput:
    """A method's answer: mutations to apply, its new state, and notes for the commit metrics."""

    mutations: list[Mutation]
    state: dict[str, Any]
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)
    source: str = "proposer"
    fallback: bool = True  # False: an empty step stays empty (e.g. GEPA's strict acceptance)


class HarnessConfig(RecipeConfig):
    """What every harness method's `learning.recipe_config` holds (each method adds its own keys)."""

    seed_rules: str = Field(DEFAULT_RULES, min_length=1, description="the rules node of a new scenario's base tree")
    strict_scores: bool = Field(False, description="refuse a report whose score is outside [0, 1]")
    proposer_max_tokens: int = Field(200, ge=1, description="the proposer's completion budget per call")
    proposer: Literal["on", "off"] = Field(
        "on", description="`off`: no proposer call, only the fallback (failing examples as worked examples)"
    )


def chat_prompt(recipe: Recipe, release_dir: Path) -> ServingPrompt:
    """What a plain chat agent is served from a harness release: its system prompt and worked examples."""
    chat = chat_harness_for(release_dir)
    return chat.system_prompt, chat.example_turns


# A release is a harness tree: pulled by an agent, or rendered into a chat's system prompt and worked examples.
HARNESS_TREE = dataclasses.replace(HARNESS, render=chat_prompt)


class AnswerMetadata(Metadata):
    """The `metadata` a harness method reads: a correct answer, under any of these names (a string or a number is
    read; `feedback` may name one the same way)."""

    expected: Any = Field(None, description="a correct answer")
    answer: Any = Field(None, description="a correct answer")
    correct_answer: Any = Field(None, description="a correct answer")
    demonstration: Any = Field(None, description="a correct answer")
    reference: Any = Field(None, description="a correct answer")


class HarnessReport(Report):
    """Harness methods learn from traces: the inferences a report cites, with its score, feedback and any correct
    answer it names; a report that cites nothing and carries no feedback is stored and skipped (no_references)."""

    metadata: AnswerMetadata | None = Field(None, description="recipe-specific fields")

    def check(self, recipe: ReportTaker) -> None:
        strict = cast(HarnessConfig, recipe.recipe_config).strict_scores
        if self.score is not None and strict and not 0.0 <= self.score <= 1.0:
            raise BadRequest("must be within [0, 1]", field="score")

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        schema = cls.model_json_schema()
        if cast(HarnessConfig, recipe.recipe_config).strict_scores:
            score = schema["properties"]["score"]
            score["anyOf"][0].update(minimum=0.0, maximum=1.0)
        return schema


class HarnessRecipe(Recipe):
    """Base of the harness methods (surface `harness`); subclasses implement `step`."""

    surface: ClassVar[Surface] = HARNESS_TREE
    config_model: ClassVar[type[HarnessConfig]] = HarnessConfig
    report_model: ClassVar[type[Report]] = HarnessReport
    recipe_config: HarnessConfig

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        try:
            load_adapter(settings.harness.default_adapter)
        except BadRequest as exc:
            raise BadRequest(exc.message, field="harness.default_adapter") from None

    @property
    def proposer_off(self) -> bool:
        """`recipe_config.proposer: off`: every step is the deterministic fallback (failing examples as memory)."""
        return self.recipe_config.proposer == "off"

    def seed(self, directory: Path) -> None:
        write_tree(self.seed_tree(), directory)

    def gate(self) -> GatePolicy:
        """The agent gate where the adapter's agent can run; a directed step (an operator's instruction) needs no
        traces and is judged by `floor` (it only guards against a change that breaks the scenario)."""
        return GatePolicy(agent_evaluator=self.agent_evaluator, takes_instructions=True, instruction_policy="floor")

    def extensions(self) -> Extensions:
        return Extensions(seed=self.seed)

    def seed_tree(self) -> HarnessTree:
        """The base tree: `recipe_config.seed_rules` (or a concise-answer rule) as one rules node."""
        return HarnessTree.of([Node("rules", "rules", {"text": self.recipe_config.seed_rules})])

    def processor(self) -> Processor:
        return TraceProcessor(self.settings.learning.batch_size, HarnessReport)

    async def step(self, given: StepInput) -> StepOutput:
        """Propose this step's mutations (method-specific)."""
        raise NotImplementedError

    async def grow(self, batch: Batch, parent_dir: Path | None, ctx: GrowContext) -> Candidate:
        """Write one candidate tree under `ctx.work_dir`."""
        parent = load_tree(parent_dir) if parent_dir is not None else self.seed_tree()
        state = load_state(parent_dir, self.name)
        commits = _commits(ctx)
        ledger = rejection_ledger(commits)
        consumed = {pid for commit in commits for pid in (commit.metrics or {}).get("proposal_ids", [])}
        queued = ProposalQueue.for_settings(ctx.settings).pending(ctx.scenario, consumed)
        tree, proposal_notes = _apply_proposals(parent, queued)
        proposer = self.proposer(ctx)
        given = StepInput(tree, list(batch.samples), state, ledger, proposer, ctx, batch.instruction, commits)
        try:
            if self.proposer_off and not batch.instruction:  # the method without its learned part: a control arm
                output = StepOutput(fallback_mutations(tree, given.traces), state, {"proposer_off": True}, "fallback")
            else:
                output = await (self.directed_step(given) if batch.instruction else self.step(given))
        except ReefError as exc:  # an unreachable or failing proposer must not stall learning
            log.warning("harness %s: the proposer failed (%s); using the fallback", self.name, exc.message)
            fallback = (
                [instruction_rule(batch.instruction)] if batch.instruction else fallback_mutations(tree, given.traces)
            )
            output = StepOutput(fallback, state, {"proposer_error": exc.message}, "fallback")
        candidate, applied, refused = apply_admissible(tree, output.mutations)
        source = output.source
        if not applied and output.fallback and output.source != "fallback":
            candidate, applied, more = apply_admissible(tree, fallback_mutations(tree, given.traces))
            refused += more
            source = "fallback"
        review = created_for_review(parent, candidate)
        out_dir = Path(ctx.work_dir) / "candidate"
        state_files = {f"{STATE_DIR}/{self.name}.json": json.dumps(output.state, indent=1, sort_keys=True)}
        write_tree(candidate, out_dir, extra=state_files)
        metrics = {
            "method": self.name,
            "source": source,
            "proposer": proposer.name,
            "mutations": proposal_notes["mutations"] + [m.to_json() for m in applied],
            "refused": proposal_notes["refused"] + refused,
            "proposal_ids": proposal_notes["proposal_ids"],
            "nodes": len(candidate),
            "traces": len(given.traces),
            "failures": sum(is_failure(t) for t in given.traces),
            **output.notes,
        }
        if batch.instruction:
            metrics["instruction"] = batch.instruction
        if review:
            metrics["needs_review"] = review  # shown with the commit; `Candidate.review` is what publishing reads
        return Candidate(out_dir, metrics, review=tuple(review))

    async def directed_step(self, given: StepInput) -> StepOutput:
        """A step an operator asked for with an instruction: the proposer turns it into mutations (the method's state
        is carried over unchanged)."""
        assert given.instruction is not None
        max_tokens = self.recipe_config.proposer_max_tokens
        mutations, source, reply = await directed_mutations(
            given.proposer, given.instruction, given.tree, given.traces, max_tokens
        )
        return StepOutput(mutations, given.state, {"proposer_reply": reply[:600]}, source, fallback=False)

    def agent_evaluator(
        self, gate_for: Callable[..., Any], release_dir: Callable[[str, str | None], Path | None]
    ) -> Evaluator | None:
        """The agent gate when the scenario's adapter has an agent Reef can run (pi, claude, codex, opencode), else None
        (the chat gate)."""
        if agent_adapter(self.settings) is None:
            return None
        return AgentEvaluator(self.settings, gate_for, release_dir)

    def proposer(self, ctx: Any) -> Proposer:
        return open_proposer(ctx.settings, ctx.engine, ctx.scenario)


def apply_admissible(tree: HarnessTree, mutations: list[Mutation]) -> tuple[HarnessTree, list[Mutation], list[str]]:
    """Apply all mutations at once; if that is refused, apply them one at a time keeping the admissible ones."""
    if not mutations:
        return tree, [], []
    try:
        return apply_mutations(tree, mutations), list(mutations), []
    except BadRequest:
        pass
    applied: list[Mutation] = []
    refused: list[str] = []
    for mutation in mutations:
        try:
            tree = apply_mutations(tree, [mutation])
            applied.append(mutation)
        except BadRequest as exc:
            refused.append(f"{mutation.op} {mutation.node_id}: {exc.message}")
    return tree, applied, refused


def fallback_mutations(tree: HarnessTree, traces: list[dict[str, Any]], limit: int = 4) -> list[Mutation]:
    """Deterministic mutations: failing examples (with their correct answer when known) as memory items.

    Worked examples in the prompt move a small model a lot (docs/results/), so this alone is a useful step.
    When nothing failed, well-scored answers become examples instead.
    """
    failures = [t for t in traces if is_failure(t) and question_of(t)]
    chosen = failures or [t for t in traces if question_of(t) and t.get("answer")]
    existing = {node.text for node in tree.of_kind("memory")}
    mutations: list[Mutation] = []
    for trace in chosen:
        text = example_text(trace)
        if text in existing:
            continue
        existing.add(text)
        mutations.append(Mutation.create(Node(memory_id(text), "memory", {"text": text, "tags": ["example"]})))
        if len(mutations) >= limit:
            break
    return mutations


def example_text(trace: dict[str, Any]) -> str:
    """A memory item from one trace: the question and the right answer, or what went wrong."""
    question = question_of(trace).strip()[:MAX_QUESTION_CHARS]
    if trace.get("expected") is not None:
        return f"Q: {question}\nA: {trace['expected']}"
    if not is_failure(trace):
        return f"Q: {question}\nA: {str(trace.get('answer', '')).strip()[:MAX_QUESTION_CHARS]}"
    feedback = trace.get("feedback")
    note = feedback if isinstance(feedback, str) else json.dumps(feedback) if feedback else "judged wrong"
    wrong = str(trace.get("answer", "")).strip()[:160]
    return f"Q: {question}\nAvoid: {wrong!r} ({str(note)[:200]})"


def memory_id(text: str, prefix: str = "mem") -> str:
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def load_state(parent_dir: Path | None, method: str) -> dict[str, Any]:
    """The method's state stored in the parent release (`state/<method>.json`), or {}."""
    if parent_dir is None:
        return {}
    path = Path(parent_dir) / STATE_DIR / f"{method}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        return {}


def rejection_ledger(commits: list[Any], limit: int = 5) -> list[dict[str, Any]]:
    """The latest rejected steps: their mutations and the gate's reason, fed back to the proposer."""
    rejected = [c for c in commits if c.verdict == "rejected"][-limit:]
    return [{"step": c.step, "reason": c.reason, "mutations": (c.metrics or {}).get("mutations", [])} for c in rejected]


def describe_ledger(ledger: list[dict[str, Any]]) -> str:
    if not ledger:
        return "none"
    lines = []
    for entry in ledger:
        summary = "; ".join(_summary(m) for m in entry["mutations"][:4]) or "no change"
        lines.append(f"- step {entry['step']}: {summary} -> rejected ({entry['reason']})")
    return "\n".join(lines)


def _summary(mutation: dict[str, Any]) -> str:
    if mutation.get("op") == "create":
        node = mutation.get("node", {})
        text = str(node.get("config", {}).get("text", ""))[:60].replace("\n", " ")
        return f"create {node.get('kind')} {text!r}"
    return f"{mutation.get('op')} {mutation.get('id')}"


def _apply_proposals(tree: HarnessTree, queued: list[dict[str, Any]]) -> tuple[HarnessTree, dict[str, Any]]:
    notes: dict[str, Any] = {"mutations": [], "refused": [], "proposal_ids": []}
    for proposal in queued:
        notes["proposal_ids"].append(proposal["proposal_id"])
        try:
            mutations = parse_mutations(proposal["mutations"])
            tree = apply_mutations(tree, mutations)
        except BadRequest as exc:
            notes["refused"].append(f"proposal {proposal['proposal_id']}: {exc.message}")
            continue
        notes["mutations"] += [m.to_json() for m in mutations]
    return tree, notes


def _commits(ctx: GrowContext) -> list[Any]:
    """The scenario's step log: `ctx.commits` if the learner passes one, else the log `reef serve` keeps."""
    log_store = ctx.commits
    if log_store is None:
        from reef.releases.commit_log import FileCommitLog

        directory = Path(ctx.settings.storage.dir).expanduser() / "commits"
        if not directory.is_dir():
            return []
        log_store = FileCommitLog(directory)
    return log_store.list(ctx.scenario, limit=10_000)
