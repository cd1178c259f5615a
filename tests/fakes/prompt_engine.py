"""A fake `Engine` whose "model" reads its system prompt: it answers a question correctly only when the
harness prompt holds a worked example `Q: <question>\nA: <answer>` for it, or the request context carries it as an
example turn (as the chat adapter serves memory items), so a harness
method's candidate really scores better when its tree carries the right examples.

Requests whose system message starts with one of `proposer_markers` are proposer calls: they get
`proposer_reply` (a weak model's loose text by default), so tests choose what the proposer says.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from reef.core.scenarios import Dialect
from reef.inference.base import Completion, RequestContext
from tests.fakes.dict_engine import DictEngine

_EXAMPLE = re.compile(r"Q: (.+?)\nA: (.+?)(?:\n|$)")


class PromptEngine(DictEngine):
    """Answers from the worked examples in the request's system prompt, else `fallback`."""

    def __init__(self, proposer_reply: str = "Be more careful and think step by step.", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.proposer_reply = proposer_reply
        self.proposer_calls: list[list[dict[str, Any]]] = []

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        self.calls.append((body, ctx))
        messages = body["messages"]
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        if ctx.system_prompt:
            system = ctx.system_prompt + "\n" + system
        prompt = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if messages[0]["role"] == "system" and not ctx.system_prompt and _is_proposer(messages[0]["content"]):
            self.proposer_calls.append(messages)
            text = self.proposer_reply
        else:
            examples = {**dict(_EXAMPLE.findall(system)), **dict(ctx.example_turns)}
            text = examples.get(prompt, self.base_answers.get(prompt, self.fallback))
        answer = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        }
        return Completion(200, json.dumps(answer).encode(), answer, body, ctx.release_id)


def _is_proposer(system: str) -> bool:
    markers = ("You improve", "You maintain a playbook", "Write one short, general strategy")
    return system.startswith(markers)
