"""The tree the golden renders and install tests use: one node of every kind."""

from reef.harness.tree import HarnessTree, Node

MARKER = "REEF-MARKER-7731"


def sample_tree() -> HarnessTree:
    return HarnessTree.of(
        [
            Node("rules", "rules", {"text": f"Reply with only the answer. Say {MARKER} if asked for the marker."}),
            Node("style", "rules", {"text": "Keep {name} placeholders literal; quotes ' and \" survive."}),
            Node("adding", "skill", {"name": "adding", "description": "Add two numbers", "text": "Add the digits."}),
            Node("review", "command", {"name": "review", "description": "Review a diff", "text": "Review $1."}),
            Node("m1", "memory", {"text": "Q: what is 2 + 2?\nA: 4", "tags": ["example"]}),
            Node("cfg", "config", {"settings": {"theme": "dark", "compaction": {"enabled": False}}}),
            Node("guard", "extension", {"name": "guard", "text": "export default function () {}"}),
        ]
    )
