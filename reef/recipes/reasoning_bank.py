"""`reasoning_bank`: distil strategies from successes and failures into memory items; retrieve the relevant ones.

The bank (all items, `state/reasoning_bank.json`) grows every step: the proposer turns each judged trace into
one item `{title, content, outcome, keywords}` ("what worked" from a success, "what to avoid / what is right"
from a failure); when its reply is unusable the item is the worked example itself. The tree then carries the
`top_k` items most relevant to the scenario's recent questions (word overlap with the batch), as memory nodes
`rb-*`: the serving prompt is static per release, so retrieval happens per step against recent traffic.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from reef.harness.mutations import Mutation
from reef.harness.proposer import parse_json_reply
from reef.harness.reply_schema import STRATEGY_REPLY, STRATEGY_SCHEMA, reply_max_tokens
from reef.harness.traces import is_failure, question_of, words
from reef.harness.tree import Node
from reef.recipes.harness_method import HarnessConfig, HarnessRecipe, StepInput, StepOutput, example_text, memory_id

PREFIX = "rb-"
MAX_BANK = 200
DISTIL = (
    "Write one short, general strategy an assistant should follow for tasks like this one, learned from the "
    'outcome shown. Reply with JSON only: {"title": "<a few words>", "strategy": "<one sentence>"}.'
)


class ReasoningBankConfig(HarnessConfig):
    """`learning.recipe_config` of the `reasoning_bank` harness method."""

    proposer_max_tokens: int = Field(80, ge=1, description="the proposer's completion budget per call")
    max_distil_per_step: int = Field(2, ge=0, description="traces distilled into memory items per step")
    top_k: int = Field(4, ge=1, description="memory items retrieved per query")


class ReasoningBank(HarnessRecipe):
    """Distil judged traces into strategy items; keep the most relevant ones in the prompt."""

    name = "reasoning_bank"
    config_model: ClassVar[type[ReasoningBankConfig]] = ReasoningBankConfig
    recipe_config: ReasoningBankConfig

    async def step(self, given: StepInput) -> StepOutput:
        bank: list[dict[str, Any]] = list(given.state.get("bank", []))
        known = {item["id"] for item in bank}
        budget = self.recipe_config.max_distil_per_step
        distilled = fallback = 0
        replies: list[str] = []
        for trace in given.traces:
            if not question_of(trace):
                continue
            item = None
            if distilled + fallback < budget:
                reply = await self._distil(given, trace)
                replies.append(reply[:300])
                item = parse_item(reply, trace)
            if item is None:
                item = self._example_item(trace)
                fallback += 1
            else:
                distilled += 1
            if item["id"] not in known:
                known.add(item["id"])
                bank.append(item)
            # A failure's worked example is always banked too: it carries the right answer.
            if is_failure(trace) and trace.get("expected") is not None:
                example = self._example_item(trace)
                if example["id"] not in known:
                    known.add(example["id"])
                    bank.append(example)
        bank = bank[-MAX_BANK:]
        queries = [words(question_of(t)) for t in given.traces]
        chosen = retrieve(bank, queries, self.recipe_config.top_k)
        current = {node.id for node in given.tree.of_kind("memory") if node.id.startswith(PREFIX)}
        wanted = {item["id"]: item for item in chosen}
        mutations = [Mutation.remove(node_id) for node_id in sorted(current - set(wanted))]
        mutations += [
            Mutation.create(
                Node(item_id, "memory", {"text": item["content"], "tags": ["reasoning_bank", item["outcome"]]})
            )
            for item_id, item in wanted.items()
            if item_id not in current
        ]
        state = {"steps": int(given.state.get("steps", 0)) + 1, "bank": bank}
        notes = {
            "bank_size": len(bank),
            "retrieved": sorted(wanted),
            "distilled": distilled,
            "proposer_replies": replies,
        }
        return StepOutput(mutations, state, notes, "proposer" if distilled else "fallback")

    async def _distil(self, given: StepInput, trace: dict[str, Any]) -> str:
        outcome = "failed" if is_failure(trace) else "succeeded"
        lines = [f"Task: {question_of(trace)[:300]}", f"Answer given: {str(trace.get('answer', ''))[:200]}"]
        if trace.get("expected") is not None:
            lines.append(f"Correct answer: {trace['expected']}")
        lines.append(f"Outcome: {outcome}")
        return await given.proposer.complete(
            [{"role": "system", "content": DISTIL}, {"role": "user", "content": "\n".join(lines)}],
            max_tokens=reply_max_tokens(STRATEGY_SCHEMA, self.recipe_config.proposer_max_tokens),
            response_format=STRATEGY_REPLY,
        )

    def _example_item(self, trace: dict[str, Any]) -> dict[str, Any]:
        text = example_text(trace)
        outcome = "failure" if is_failure(trace) else "success"
        return {
            "id": memory_id(text, PREFIX.rstrip("-")),
            "title": question_of(trace)[:60],
            "content": text,
            "outcome": outcome,
            "keywords": sorted(words(question_of(trace))),
        }


def parse_item(reply: str, trace: dict[str, Any]) -> dict[str, Any] | None:
    """A bank item from a `{"title", "strategy"}` reply (what the reply schema asks for) or a `Title: … / Strategy: …`
    one, or None if the reply has no usable strategy."""
    parsed = parse_json_reply(reply)
    if isinstance(parsed, dict) and isinstance(parsed.get("strategy"), str):
        title_text, strategy_text = str(parsed.get("title") or ""), parsed["strategy"]
    else:
        title = re.search(r"(?im)^\s*\**title\**\s*:\s*(.+)$", reply)
        strategy = re.search(r"(?im)^\s*\**strategy\**\s*:\s*(.+)$", reply)
        title_text, strategy_text = (title.group(1) if title else ""), (strategy.group(1) if strategy else "")
    if len(strategy_text.strip()) < 12:
        return None
    content = strategy_text.strip()[:400]
    return {
        "id": memory_id(content, PREFIX.rstrip("-")),
        "title": (title_text.strip() or content)[:80],
        "content": content,
        "outcome": "failure" if is_failure(trace) else "success",
        "keywords": sorted(words(question_of(trace)) | words(content)),
    }


def retrieve(bank: list[dict[str, Any]], queries: list[set[str]], top_k: int) -> list[dict[str, Any]]:
    """The `top_k` items with the most keyword overlap with any query (newer first on ties)."""

    def relevance(index_item: tuple[int, dict[str, Any]]) -> tuple[int, int]:
        index, item = index_item
        keywords = set(item.get("keywords", []))
        return max((len(keywords & query) for query in queries), default=0), index

    ranked = sorted(enumerate(bank), key=relevance, reverse=True)
    return [item for _, item in ranked[:top_k]]


RECIPE = ReasoningBank
