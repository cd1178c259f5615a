"""The judges: an OpenAI- or Anthropic-compatible endpoint, or a Python function; chosen by `recipe_config`.

    judge_url: http://host:8000        # the provider's base URL (a trailing /v1 is accepted)
    judge_model: some-model
    judge_api: openai | anthropic      # the wire format (default openai: POST /v1/chat/completions)
    judge_api_key_env: REEF_JUDGE_API_KEY   # the environment variable holding the key (never the key itself)
  or
    judge_function: package.module:function   # called as function(JudgeRequest) -> vote

A function returns a vote (−1 / 0 / 1, or a reply text `parse_vote` reads), a `Vote`, or a dict
`{"vote": v, "hint": "…"}`; it runs in a worker thread. The endpoint gets `votes.SYSTEM_PROMPT` and
`votes.judge_prompt(...)`, sampled at `judge_temperature`, and answers in text that `parse_vote` / `parse_hint` read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import math
import os
from collections.abc import Callable
from typing import Any

import httpx

from reef.core.errors import BadRequest
from reef.judge.base import Judge, JudgeRequest, Vote
from reef.judge.votes import SYSTEM_PROMPT, judge_prompt, parse_hint, parse_vote

DEFAULT_KEY_ENV = "REEF_JUDGE_API_KEY"


@dataclasses.dataclass(frozen=True, slots=True)
class JudgeSettings:
    """The judge's part of `recipe_config`, validated (`from_config`)."""

    url: str | None = None
    model: str | None = None
    api: str = "openai"
    api_key_env: str = DEFAULT_KEY_ENV
    function: str | None = None
    votes: int = 3
    max_hints: int = 3
    timeout_s: float = 30.0
    retries: int = 2
    concurrency: int = 4
    temperature: float = 0.7
    max_tokens: int = 256

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> JudgeSettings:
        """Read `judge_*`, `votes` and `max_hints`; BadRequest naming `recipe_config.<key>` for a bad value."""
        url, function = config.get("judge_url"), config.get("judge_function")
        if not url and not function:
            raise BadRequest(
                "the openclawrl recipe needs a judge: judge_url (an OpenAI/Anthropic-compatible endpoint) or "
                "judge_function ('package.module:function')",
                field="recipe_config.judge_url",
            )
        if url and function:
            raise BadRequest("give judge_url or judge_function, not both", field="recipe_config.judge_function")
        if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            raise BadRequest("judge_url must be an http(s) URL", field="recipe_config.judge_url")
        if function is not None and (not isinstance(function, str) or ":" not in function):
            raise BadRequest("judge_function must be 'package.module:function'", field="recipe_config.judge_function")
        if url and not config.get("judge_model"):
            raise BadRequest("an endpoint judge needs judge_model", field="recipe_config.judge_model")
        api = config.get("judge_api", "openai")
        if api not in ("openai", "anthropic"):
            raise BadRequest("judge_api is 'openai' or 'anthropic'", field="recipe_config.judge_api")
        return cls(
            url=url.rstrip("/").removesuffix("/v1") if url else None,
            model=config.get("judge_model"),
            api=api,
            api_key_env=str(config.get("judge_api_key_env") or DEFAULT_KEY_ENV),
            function=function,
            votes=_positive_int(config, "votes", 3),
            max_hints=_positive_int(config, "max_hints", 3),
            timeout_s=_positive_float(config, "judge_timeout_s", 30.0),
            retries=_positive_int(config, "judge_retries", 2, minimum=0),
            concurrency=_positive_int(config, "judge_concurrency", 4),
            temperature=_positive_float(config, "judge_temperature", 0.7, minimum=0.0),
            max_tokens=_positive_int(config, "judge_max_tokens", 256),
        )


def _positive_int(config: dict[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequest(f"{key} must be an integer ≥ {minimum}", field=f"recipe_config.{key}")
    return value


def _positive_float(config: dict[str, Any], key: str, default: float, minimum: float | None = None) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a number", field=f"recipe_config.{key}")
    if (minimum is None and value <= 0) or (minimum is not None and value < minimum):
        raise BadRequest(f"{key} must be {'> 0' if minimum is None else f'≥ {minimum}'}", field=f"recipe_config.{key}")
    return float(value)


def open_judge(settings: JudgeSettings) -> Judge:
    """The judge `settings` name: an endpoint, or the imported function (BadRequest if it cannot be imported)."""
    if settings.function:
        return FunctionJudge(settings.function)
    return EndpointJudge(settings)


class FunctionJudge(Judge):
    """A Python function `package.module:function(JudgeRequest)`, run in a worker thread."""

    def __init__(self, dotted: str) -> None:
        module_name, _, attribute = dotted.partition(":")
        try:
            function = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise BadRequest(f"cannot import the judge {dotted!r} ({exc})", field="recipe_config.judge_function")
        if not callable(function):
            raise BadRequest(f"the judge {dotted!r} is not callable", field="recipe_config.judge_function")
        self.function: Callable[[JudgeRequest], Any] = function
        self.name = f"function:{dotted}"

    async def vote(self, request: JudgeRequest) -> Vote:
        return as_vote(await asyncio.to_thread(self.function, request))


def as_vote(answer: Any) -> Vote:
    """A function judge's answer as a `Vote` (see the module docstring)."""
    if isinstance(answer, Vote):
        return answer
    if isinstance(answer, dict):
        hint = answer.get("hint")
        return Vote(parse_vote(answer.get("vote")), hint if isinstance(hint, str) and hint.strip() else None)
    if isinstance(answer, str):
        return Vote(parse_vote(answer), parse_hint(answer), answer)
    return Vote(parse_vote(answer))


class EndpointJudge(Judge):
    """A chat model behind an OpenAI (`/v1/chat/completions`) or Anthropic (`/v1/messages`) endpoint."""

    def __init__(self, settings: JudgeSettings) -> None:
        assert settings.url is not None and settings.model is not None
        self.settings = settings
        self.name = f"{settings.api}:{settings.model}@{settings.url}"
        key = os.environ.get(settings.api_key_env, "")
        headers = {}
        if key and settings.api == "anthropic":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        elif key:
            headers = {"authorization": f"Bearer {key}"}
        self._client = httpx.AsyncClient(base_url=settings.url, headers=headers, timeout=settings.timeout_s)
        self._on_usage: Callable[[Any], None] | None = None

    def meter(self, on_usage: Callable[[Any], None]) -> None:
        self._on_usage = on_usage

    def _spent(self, answer: Any) -> Any:
        if self._on_usage is not None and isinstance(answer, dict):
            self._on_usage(answer.get("usage"))
        return answer

    async def vote(self, request: JudgeRequest) -> Vote:
        prompt = judge_prompt(request.messages, request.answer, request.next_state)
        text = await (self._anthropic(prompt) if self.settings.api == "anthropic" else self._openai(prompt))
        return Vote(parse_vote(text), parse_hint(text), text)

    async def _openai(self, prompt: str) -> str:
        body = {
            "model": self.settings.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        response = await self._client.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        choices = self._spent(response.json()).get("choices") or [{}]
        return str((choices[0].get("message") or {}).get("content") or "")

    async def _anthropic(self, prompt: str) -> str:
        body = {
            "model": self.settings.model,
            "system": SYSTEM_PROMPT,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": min(self.settings.temperature, 1.0),
            "max_tokens": self.settings.max_tokens,
        }
        response = await self._client.post("/v1/messages", json=body)
        response.raise_for_status()
        blocks = self._spent(response.json()).get("content") or []
        return "".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    async def aclose(self) -> None:
        await self._client.aclose()
