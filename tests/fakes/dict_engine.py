"""A fake `Engine` that answers chat requests from a dict: the "model" is the `answers.json` of a release.

The answer to a prompt (the last user text) comes from the candidate directory when the context names one,
else from the scenario's activated release directory, else from `base_answers`; unknown prompts get
`fallback`. So a candidate trained (by `FakeTrainingBackend`) on the right demonstrations really answers
better, and the learner's gate can be tested end to end without a model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reef.core.releases import Release
from reef.core.scenarios import Dialect
from reef.inference.base import Completion, CompletionStream, Engine, RequestContext

ANSWERS_FILE = "answers.json"


def read_answers(directory: Path | None) -> dict[str, str]:
    """The prompt → answer table a fake release or candidate holds ({} if none)."""
    if directory is None or not (Path(directory) / ANSWERS_FILE).exists():
        return {}
    return json.loads((Path(directory) / ANSWERS_FILE).read_text())


class DictEngine(Engine):
    """Answers from dicts; keeps every call (`calls`) and activation (`activations`) for assertions."""

    def __init__(self, base_answers: dict[str, str] | None = None, fallback: str = "I do not know") -> None:
        self.base_answers = dict(base_answers or {})
        self.fallback = fallback
        self.calls: list[tuple[dict[str, Any], RequestContext]] = []
        self.activations: list[tuple[str, str | None]] = []
        self._active: dict[str, tuple[Release | None, Path | None]] = {}
        self.fail_with: Exception | None = None

    async def start(self) -> None:
        return None

    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append((body, ctx))
        prompt = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        if ctx.candidate_path is not None:
            table = read_answers(ctx.candidate_path)
        else:
            table = read_answers(self._active.get(ctx.scenario, (None, None))[1])
        text = table.get(prompt, self.base_answers.get(prompt, self.fallback))
        answer = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        }
        return Completion(
            status=200,
            raw=json.dumps(answer).encode(),
            body=answer,
            request=body,
            release_id=ctx.release_id or self.active_release_id(ctx.scenario),
        )

    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        raise NotImplementedError("DictEngine does not stream")

    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return {"input_tokens": len(json.dumps(body)) // 4}

    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        self._active[scenario] = (release, path)
        self.activations.append((scenario, release.release_id if release is not None else None))

    def active_release_id(self, scenario: str) -> str | None:
        release = self._active.get(scenario, (None, None))[0]
        return release.release_id if release is not None else None

    def models(self) -> list[dict[str, Any]]:
        return [{"id": "fake", "object": "model", "owned_by": "reef"}]

    async def aclose(self) -> None:
        return None
