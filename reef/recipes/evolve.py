"""`evolve`: a reflective proposer reads failing traces and their feedback and proposes harness mutations.

The proposer sees the current harness (as the chat system prompt), up to `recipe_config.max_failures` failing
traces with their feedback, and the rejection ledger (recent candidates the gate refused, with its reason),
and answers with JSON mutations. A reply that does not parse or is refused falls back to failing examples as
memory items, so every step yields a candidate.
"""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import Field

from reef.harness.chat import system_prompt_of
from reef.harness.mutations import coerce_mutations
from reef.harness.proposer import parse_json_reply
from reef.harness.reply_schema import NODES_REPLY, NODES_SCHEMA, reply_max_tokens
from reef.harness.traces import is_failure, question_of
from reef.recipes.harness_method import (
    HarnessConfig,
    HarnessRecipe,
    StepInput,
    StepOutput,
    describe_ledger,
    fallback_mutations,
)

INSTRUCTIONS = (
    "You improve the instructions of an AI assistant. Given its current instructions and tasks it failed, "
    "write new instructions that would make it answer correctly. Reply with a JSON list only, e.g. "
    '[{"kind": "rules", "text": "Reply with only the final number."}, '
    '{"kind": "memory", "text": "Q: 2 + 3\\nA: 5"}]. Kinds: rules (an instruction), memory (a worked example).'
)


class EvolveConfig(HarnessConfig):
    """`learning.recipe_config` of the `evolve` harness method."""

    max_failures: int = Field(4, ge=1, description="failing traces the proposer sees per step")


class Evolve(HarnessRecipe):
    """Reflect on failures + feedback, propose mutations; the evaluation gate decides."""

    name = "evolve"
    config_model: ClassVar[type[EvolveConfig]] = EvolveConfig
    recipe_config: EvolveConfig

    async def step(self, given: StepInput) -> StepOutput:
        state = {"steps": int(given.state.get("steps", 0)) + 1}
        failing = [t for t in given.traces if is_failure(t)][: self.recipe_config.max_failures]
        if not failing:
            return StepOutput(fallback_mutations(given.tree, given.traces), state, {}, "fallback")
        reply = await given.proposer.complete(
            [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": self.reflection_prompt(given, failing)},
            ],
            max_tokens=reply_max_tokens(NODES_SCHEMA, self.recipe_config.proposer_max_tokens),
            response_format=NODES_REPLY,
        )
        mutations = coerce_mutations(parse_json_reply(reply), id_prefix="evolve")
        notes = {"proposer_reply": reply[:600]}
        if not mutations:
            return StepOutput(fallback_mutations(given.tree, given.traces), state, notes, "fallback")
        return StepOutput(mutations, state, notes)

    def reflection_prompt(self, given: StepInput, failing: list[dict]) -> str:
        lines = ["Current instructions:", system_prompt_of(given.tree) or "(none)", "", "Failed tasks:"]
        for trace in failing:
            lines.append(f"- Task: {question_of(trace)[:300]}")
            lines.append(f"  Answer given: {str(trace.get('answer', ''))[:200]}")
            if trace.get("expected") is not None:
                lines.append(f"  Correct answer: {trace['expected']}")
            feedback = trace.get("feedback")
            if feedback:
                text = feedback if isinstance(feedback, str) else json.dumps(feedback)
                lines.append(f"  Feedback: {text[:200]}")
        lines += ["", "Changes rejected before (do not repeat them):", describe_ledger(given.ledger)]
        return "\n".join(lines)


RECIPE = Evolve
