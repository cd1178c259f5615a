"""The proposer: the model a harness method asks for mutations, lessons or strategies.

`settings.harness.proposer_url` names any OpenAI- or Anthropic-compatible endpoint (`proposer_api`,
`proposer_model`, `proposer_api_key`); unset, the proposer is the served model itself through the in-process
engine (never recorded). Small models answer loosely, so replies are parsed defensively and a method always
has a deterministic fallback.
"""

from __future__ import annotations

import abc
import functools
import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from reef.core.errors import UpstreamError
from reef.core.scenarios import Dialect
from reef.core.settings import Settings
from reef.inference.base import Engine, RequestContext

Messages = list[dict[str, str]]


class Proposer(abc.ABC):
    """Answers a chat conversation with text."""

    name: str = "proposer"

    @abc.abstractmethod
    async def complete(
        self, messages: Messages, max_tokens: int = 256, response_format: dict[str, Any] | None = None
    ) -> str:
        """The assistant's reply text, of `response_format`'s shape where the endpoint honours it (see
        `reef.harness.reply_schema`); raises ReefError when the model cannot be reached."""


class EngineProposer(Proposer):
    """The served model through the deployment's own engine (no harness prompt, no recording)."""

    def __init__(self, engine: Engine, scenario: str, model: str) -> None:
        self.engine, self.scenario, self.model = engine, scenario, model
        self.name = f"engine:{model}"

    async def complete(
        self, messages: Messages, max_tokens: int = 256, response_format: dict[str, Any] | None = None
    ) -> str:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
        if response_format is not None:
            body["response_format"] = response_format
        completion = await self.engine.complete(Dialect.CHAT, body, RequestContext(self.scenario))
        if completion.status >= 400:
            raise UpstreamError(f"the proposer answered {completion.status}")
        return str((completion.body["choices"][0]["message"].get("content")) or "")


class HttpProposer(Proposer):
    """Any OpenAI-compatible (`/v1/chat/completions`) or Anthropic-compatible (`/v1/messages`) endpoint."""

    def __init__(
        self,
        url: str,
        api: str,
        model: str,
        api_key: str | None,
        timeout_s: float = 120.0,
        on_usage: Callable[[Any], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/").removesuffix("/v1")
        self.api, self.model, self._api_key, self.timeout_s = api, model, api_key, timeout_s
        self.name = f"{api}:{model}"
        self._on_usage = on_usage  # each answer's `usage` (the learner's upstream budget counts it)

    async def complete(
        self, messages: Messages, max_tokens: int = 256, response_format: dict[str, Any] | None = None
    ) -> str:
        headers = {"content-type": "application/json"}
        if self.api == "anthropic":
            system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
            body: dict[str, Any] = {
                "model": self.model,
                "max_tokens": max_tokens,
                "messages": [m for m in messages if m["role"] != "system"],
            }
            if system:
                body["system"] = system
            if self._api_key:
                headers["x-api-key"] = self._api_key
            headers["anthropic-version"] = "2023-06-01"
            path = "/v1/messages"
        else:
            body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
            if response_format is not None:
                body["response_format"] = response_format
            if self._api_key:
                headers["authorization"] = f"Bearer {self._api_key}"
            path = "/v1/chat/completions"
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                response = await client.post(self.url + path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"the proposer at {self.url} is unreachable: {type(exc).__name__}")
        if response.status_code >= 400:
            raise UpstreamError(f"the proposer answered {response.status_code}")
        data = response.json()
        if self._on_usage is not None and isinstance(data, dict):
            self._on_usage(data.get("usage"))
        if self.api == "anthropic":
            return "".join(part.get("text", "") for part in data.get("content", []) if isinstance(part, dict))
        return str(data["choices"][0]["message"].get("content") or "")


def open_proposer(settings: Settings, engine: Engine, scenario: str) -> Proposer:
    """The proposer `settings.harness` names, or the served model through `engine`."""
    harness = settings.harness
    model = harness.proposer_model or settings.inference.served_model_name or settings.inference.upstream_model
    if harness.proposer_url:
        key = harness.proposer_api_key.get_secret_value() if harness.proposer_api_key else None
        # Under an upstream budget the learner's engine counts what the proposer endpoint spends.
        on_usage = functools.partial(engine.spend, scenario)
        return HttpProposer(
            harness.proposer_url, harness.proposer_api, model or "default", key, harness.episode_timeout_s, on_usage
        )
    return EngineProposer(engine, scenario, model or "reef")


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_reply(text: str) -> Any | None:
    """The reply itself when it is one JSON array or object (a schema-constrained reply, whose strings may hold code
    fences), else the first JSON array or object inside a code fence or bare, or None."""
    whole = text.strip()
    if whole[:1] in ("[", "{"):
        try:
            return json.loads(whole)
        except json.JSONDecodeError:
            pass
    candidates = [block for block in _FENCE.findall(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for i, char in enumerate(candidate):
            if char not in "[{":
                continue
            try:
                value, _ = decoder.raw_decode(candidate[i:])
            except json.JSONDecodeError:
                continue
            return value
    return None


def parse_bullets(text: str, max_items: int = 8, max_chars: int = 400) -> list[str]:
    """Lines that look like list items (`- x`, `* x`, `1. x`), stripped, de-duplicated, length-capped."""
    found: list[str] = []
    for line in text.splitlines():
        match = re.match(r"\s*(?:[-*•]|\d+[.)])\s+(.*\S)", line)
        if not match:
            continue
        item = match.group(1).strip()[:max_chars]
        if len(item) >= 8 and item not in found:
            found.append(item)
        if len(found) >= max_items:
            break
    return found
