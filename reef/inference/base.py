"""The `Engine` contract: what the service calls to answer an inference request.

The engine knows nothing of HTTP routing or records; it gets a provider-native body in a `Dialect` and answers
in the same dialect (translating internally when its backend speaks another).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

from reef.core.capabilities import Capability
from reef.core.payloads import TrainingCapture
from reef.core.releases import Release
from reef.core.scenarios import Dialect


@dataclasses.dataclass(frozen=True, slots=True)
class RequestContext:
    """Who a request is for: the scenario and, optionally, a pinned release or an unpublished candidate adapter.

    `system_prompt` (from a harness `chat` adapter) is prepended to the conversation by the engine, and
    `example_turns` (its worked examples, `(question, answer)`) follow it as earlier user/assistant turns: a small
    model imitates solved turns far better than examples described in a system prompt.
    """

    scenario: str
    release_id: str | None = None
    candidate_path: Path | None = None
    system_prompt: str | None = None
    example_turns: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Completion:
    """A finished non-streaming answer.

    `raw` is the exact body to send to the client (provider-native, in the request's dialect); `body` is it parsed.
    `request` is the body as forwarded (for the record). `training` (local engine only) holds
    `prompt_token_ids`, `completion_token_ids`, `logprobs`; it is recorded, never sent to the client.
    """

    status: int
    raw: bytes
    body: dict[str, Any]
    request: dict[str, Any]
    release_id: str | None = None
    # The last parsed JSON chunk/event of the stream (chat: its id/created/model feed the in-band receipt chunk).
    last_chunk: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    training: TrainingCapture | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class StreamFrame:
    """One whole SSE event (bytes as relayed, ending in a blank line); `terminal` marks the frame to hold back.

    `more` says another frame is already at hand (it arrived in the same read), so the service may send both
    in one write without delaying either.
    """

    data: bytes
    terminal: bool = False
    more: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class StreamResult:
    """What a finished (or cut) stream amounts to: the assembled final message in the request's dialect."""

    body: dict[str, Any]
    complete: bool
    usage: dict[str, Any] | None = None
    training: TrainingCapture | None = None
    error: str | None = None


class CompletionStream(abc.ABC):
    """An open streaming answer: iterate frames, then read `result()`."""

    request: dict[str, Any]
    release_id: str | None = None
    # The last parsed JSON chunk/event of the stream (chat: its id/created/model feed the in-band receipt chunk).
    last_chunk: dict[str, Any] | None = None

    @abc.abstractmethod
    def frames(self) -> AsyncIterator[StreamFrame]:
        """The SSE frames in order; the terminal frame (if the stream ends normally) is marked."""

    @abc.abstractmethod
    def result(self) -> StreamResult:
        """The assembled message so far; `complete` is False if the stream was cut short."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Stop early (client gone) and free the underlying connection or decoding slot."""


class Engine(abc.ABC):
    """Answers provider-native requests; one per deployment."""

    # Whether `score` works here (a learning gate holds rollouts back for ranking only when it does).
    scores_completions: bool = False
    # What this engine supplies to recipes (`reef.core.capabilities`); `reef serve` checks it before loading.
    supplies: ClassVar[frozenset[Capability]] = frozenset()

    @abc.abstractmethod
    async def start(self) -> None:
        """Open connections / load models. Called once before serving."""

    @abc.abstractmethod
    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        """Answer a non-streaming request. Raises ReefError subclasses (UpstreamError, Unavailable, ...)."""

    @abc.abstractmethod
    async def stream(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> CompletionStream:
        """Open a streaming answer; errors before the first frame are raised here, not in the stream."""

    @abc.abstractmethod
    async def count_tokens(self, body: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """Anthropic `count_tokens`: `{"input_tokens": n}`."""

    async def score(self, prompt_ids: list[int], completion_ids: list[int], ctx: RequestContext) -> list[float]:
        """The per-token log-probabilities of `completion_ids` after `prompt_ids` under the release (or candidate)
        `ctx` names; NotImplementedError where the engine cannot (an upstream provider)."""
        raise NotImplementedError(f"{type(self).__name__} cannot score completions")

    async def score_answer(self, body: dict[str, Any], answer: str, ctx: RequestContext) -> list[float]:
        """The per-token log-probabilities of `answer` followed by the end of the turn, as the reply to the chat
        request `body`, under the release (or candidate) `ctx` names; NotImplementedError where `score` is."""
        raise NotImplementedError(f"{type(self).__name__} cannot score completions")

    @abc.abstractmethod
    async def activate(self, scenario: str, release: Release | None, path: Path | None) -> None:
        """Serve `scenario` with `release` (whose files are at `path`) from now on; None = the base model."""

    @abc.abstractmethod
    def active_release_id(self, scenario: str) -> str | None:
        """The release currently serving `scenario`, if any."""

    @abc.abstractmethod
    def models(self) -> list[dict[str, Any]]:
        """OpenAI `/v1/models` entries."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections / threads."""

    def spend(self, scenario: str, usage: Any) -> None:  # noqa: B027 - only a metered engine counts
        """Count an answer's `usage` that a caller got from elsewhere on this engine's behalf (a proposer endpoint)
        against `scenario`'s upstream budget; nothing by default (an engine without a budget)."""
