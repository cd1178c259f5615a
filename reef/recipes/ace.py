"""`ace` (Agentic Context Engineering): an evolving playbook of bullets, changed by small deltas only.

The playbook is the tree's memory nodes tagged `playbook`; each carries `helpful` / `harmful` counters.
Each step:
1. reflect: every trace credits the bullets relevant to its question (word overlap; all bullets when the
   playbook is small) — helpful on success, harmful on failure;
2. curate: the proposer writes up to `max_new_bullets` new bullets from the failures (a bullet list);
   failing examples are the fallback;
3. merge near-duplicate bullets (word-set Jaccard ≥ `merge_similarity`) by summing counters into the older;
4. prune bullets whose harmful count exceeds their helpful count by `prune_margin`, and the weakest ones
   beyond `max_bullets`.
Every change is a create / update / remove of one bullet: the playbook is never rewritten wholesale.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from reef.harness.mutations import Mutation
from reef.harness.proposer import parse_bullets, parse_json_reply
from reef.harness.reply_schema import TIPS_REPLY, TIPS_SCHEMA, reply_max_tokens
from reef.harness.traces import is_failure, jaccard, question_of, words
from reef.harness.tree import HarnessTree, Node
from reef.recipes.harness_method import HarnessConfig, HarnessRecipe, StepInput, StepOutput, example_text, memory_id

TAG = "playbook"
CURATE = (
    "You maintain a playbook of short, general tips for an AI assistant. From the failed tasks below, write "
    'up to 3 new tips as a JSON list of strings, e.g. ["Reply with only the number."]. Each tip one sentence. '
    "No other text."
)


class AceConfig(HarnessConfig):
    """`learning.recipe_config` of the `ace` harness method."""

    proposer_max_tokens: int = Field(120, ge=1, description="the proposer's completion budget per call")
    credit_all_below: int = Field(4, ge=0, description="with this many bullets or fewer, all share a trace's credit")
    max_new_bullets: int = Field(3, ge=0, description="bullets one step may add")
    merge_similarity: float = Field(0.8, ge=0, le=1, description="similarity at which two bullets are merged")
    prune_margin: int = Field(2, ge=0, description="a bullet is pruned once harmful exceeds helpful by this much")
    max_bullets: int = Field(30, ge=1, description="bullets the playbook keeps")


class Ace(HarnessRecipe):
    """Incremental playbook deltas with helpful/harmful counters; merge and prune, never rewrite."""

    name = "ace"
    config_model: ClassVar[type[AceConfig]] = AceConfig
    recipe_config: AceConfig

    async def step(self, given: StepInput) -> StepOutput:
        bullets = [node for node in given.tree.of_kind("memory") if TAG in node.config.get("tags", [])]
        counters = {
            node.id: [int(node.config.get("helpful", 0)), int(node.config.get("harmful", 0))] for node in bullets
        }
        self._reflect(bullets, counters, given.traces)
        mutations = [
            Mutation.update(node.id, {"helpful": counters[node.id][0], "harmful": counters[node.id][1]})
            for node in bullets
            if counters[node.id] != [int(node.config.get("helpful", 0)), int(node.config.get("harmful", 0))]
        ]
        new_texts, source, reply = await self._curate(given)
        existing = {node.text for node in bullets}
        for text in new_texts:
            if text not in existing:
                existing.add(text)
                config = {"text": text, "tags": [TAG], "helpful": 0, "harmful": 0}
                mutations.append(Mutation.create(Node(memory_id(text, "ace"), "memory", config)))
        mutations += self._merge_and_prune(bullets, counters)
        state = {"steps": int(given.state.get("steps", 0)) + 1}
        notes: dict[str, Any] = {"bullets_before": len(bullets), "new_bullets": len(new_texts)}
        if reply:
            notes["proposer_reply"] = reply[:600]
        return StepOutput(mutations, state, notes, source)

    def _reflect(self, bullets: list[Node], counters: dict[str, list[int]], traces: list[dict[str, Any]]) -> None:
        small = len(bullets) <= self.recipe_config.credit_all_below
        for trace in traces:
            question = words(question_of(trace))
            failed = is_failure(trace)
            for node in bullets:
                if small or words(node.text) & question:
                    counters[node.id][1 if failed else 0] += 1

    async def _curate(self, given: StepInput) -> tuple[list[str], str, str]:
        limit = self.recipe_config.max_new_bullets
        failures = [t for t in given.traces if is_failure(t)][:4]
        if not failures:
            return [], "proposer", ""
        lines = []
        for trace in failures:
            lines.append(f"- Task: {question_of(trace)[:200]}")
            if trace.get("expected") is not None:
                lines.append(f"  Correct answer: {trace['expected']}")
            lines.append(f"  Answer given: {str(trace.get('answer', ''))[:160]}")
        reply = await given.proposer.complete(
            [{"role": "system", "content": CURATE}, {"role": "user", "content": "\n".join(lines)}],
            max_tokens=reply_max_tokens(TIPS_SCHEMA, self.recipe_config.proposer_max_tokens),
            response_format=TIPS_REPLY,
        )
        tips = parse_tips(reply, limit)
        # Worked examples always ride along: a weak proposer's tips alone rarely move a small model.
        examples = [example_text(trace) for trace in failures if question_of(trace)][:limit]
        return tips + examples, ("proposer" if tips else "fallback"), reply

    def _merge_and_prune(self, bullets: list[Node], counters: dict[str, list[int]]) -> list[Mutation]:
        similarity = self.recipe_config.merge_similarity
        margin = self.recipe_config.prune_margin
        removed: set[str] = set()
        mutations: list[Mutation] = []
        for i, older in enumerate(bullets):
            if older.id in removed:
                continue
            for newer in bullets[i + 1 :]:
                if newer.id not in removed and jaccard(words(older.text), words(newer.text)) >= similarity:
                    counters[older.id] = [a + b for a, b in zip(counters[older.id], counters[newer.id], strict=True)]
                    removed.add(newer.id)
                    mutations.append(
                        Mutation.update(older.id, {"helpful": counters[older.id][0], "harmful": counters[older.id][1]})
                    )
        for node in bullets:
            helpful, harmful = counters[node.id]
            if node.id not in removed and harmful - helpful >= margin:
                removed.add(node.id)
        alive = sorted((n for n in bullets if n.id not in removed), key=lambda n: counters[n.id][0] - counters[n.id][1])
        excess = len(alive) - self.recipe_config.max_bullets
        removed.update(node.id for node in alive[: max(excess, 0)])
        # Updates of removed bullets are dropped: a remove must be the last word on a node.
        mutations = [m for m in mutations if m.node_id not in removed]
        return mutations + [Mutation.remove(node_id) for node_id in sorted(removed)]


def parse_tips(reply: str, limit: int) -> list[str]:
    """The tips of a reply: a JSON list of strings (what the reply schema asks for), else a bulleted list."""
    parsed = parse_json_reply(reply)
    if isinstance(parsed, list) and parsed and all(isinstance(tip, str) for tip in parsed):
        return [tip.strip()[:300] for tip in parsed if len(tip.strip()) >= 8][:limit]
    return parse_bullets(reply, max_items=limit, max_chars=300)


def playbook(tree: HarnessTree) -> list[Node]:
    """The playbook bullets of a tree, in order."""
    return [node for node in tree.of_kind("memory") if TAG in node.config.get("tags", [])]


RECIPE = Ace
