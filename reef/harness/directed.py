"""User-directed steps: an operator's instruction (`POST /reef/train {"text"}`) turned into harness mutations.

The proposer sees the instruction, the current tree and a few recent traces, and answers with mutations; when its
reply is unusable the instruction itself becomes a rules node, so the step always carries what was asked. Such a
step is selected by policy `floor` (the recipe's `instruction_policy`), and any executable node it creates (an
`extension`, a `command`, a config node with an executable settings key) is stored pending review (`needs_review`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reef.harness.admission import is_executable
from reef.harness.mutations import Mutation, coerce_mutations
from reef.harness.proposer import Proposer, parse_json_reply
from reef.harness.reply_schema import NODES_REPLY, NODES_SCHEMA, reply_max_tokens
from reef.harness.traces import question_of
from reef.harness.tree import HarnessTree, Node

MAX_TRACES_SHOWN = 3
DIRECT = (
    "You improve an AI agent's harness (its rules, skills, commands, memory) as its operator instructs. Reply with "
    'a JSON list of nodes only, e.g. [{"kind": "rules", "text": "Always run the tests before answering."}]. '
    "Kinds: rules, skill (with name, description), command (with name, description), memory, extension "
    "(with name: agent code)."
)


def direction_prompt(instruction: str, tree: HarnessTree, traces: list[dict[str, Any]]) -> str:
    """The proposer's user message for a directed step: the instruction first, then the tree and recent traces."""
    lines = [f"Operator's instruction: {instruction}", "", "Current harness nodes:"]
    lines += [f"- {node.id} ({node.kind}): {json.dumps(node.config)[:200]}" for node in tree] or ["(none)"]
    shown = [t for t in traces if question_of(t)][:MAX_TRACES_SHOWN]
    if shown:
        lines += ["", "Recent tasks:"] + [f"- {question_of(t)[:200]}" for t in shown]
    return "\n".join(lines)


async def directed_mutations(
    proposer: Proposer, instruction: str, tree: HarnessTree, traces: list[dict[str, Any]], max_tokens: int = 200
) -> tuple[list[Mutation], str, str]:
    """(mutations, source, proposer reply): the proposer's nodes, else the instruction as a rules node."""
    messages = [
        {"role": "system", "content": DIRECT},
        {"role": "user", "content": direction_prompt(instruction, tree, traces)},
    ]
    reply = await proposer.complete(
        messages, max_tokens=reply_max_tokens(NODES_SCHEMA, max_tokens), response_format=NODES_REPLY
    )
    existing = {node.text for node in tree if node.text}
    # A small model often echoes the tree back: a node the tree already holds is no change.
    mutations = [
        m
        for m in coerce_mutations(parse_json_reply(reply), id_prefix="directed")
        if not (m.op == "create" and m.node is not None and m.node.text in existing)
    ]
    if mutations:
        return mutations, "proposer", reply
    return [instruction_rule(instruction)], "fallback", reply


def instruction_rule(instruction: str) -> Mutation:
    """The instruction itself as a rules node (the deterministic fallback of a directed step)."""
    digest = hashlib.sha256(instruction.encode()).hexdigest()[:10]
    return Mutation.create(Node(f"directed-{digest}", "rules", {"text": instruction.strip()}))


def created_for_review(before: HarnessTree, after: HarnessTree) -> list[str]:
    """Ids of executable nodes in `after` (extensions, commands, config nodes with an executable settings key) that
    `before` lacks or that changed: they need review."""
    found = []
    for node in after:
        if is_executable(node) and before.get(node.id) != node:
            found.append(node.id)
    return found
