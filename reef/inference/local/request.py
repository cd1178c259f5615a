"""One request's way into the scheduler and its events back: rendering, validation, binding and the event queue."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import torch

from reef.core.errors import BadRequest, ReefError
from reef.core.scenarios import Dialect
from reef.inference.base import RequestContext
from reef.inference.local.adapters import Binding, Bindings
from reef.inference.local.detokenize import TextTracker
from reef.inference.local.prompt import chat_messages, render_prompt_ids
from reef.inference.local.sampling import SamplingParams, sampling_params
from reef.inference.local.scheduler import Event, Failed, Scheduler, Sequence
from reef.inference.local.structured import Constraint
from reef.inference.translate import check_request, convert_request

_CONVERSATION_FIELD = {Dialect.CHAT: "messages", Dialect.MESSAGES: "messages", Dialect.RESPONSES: "input"}
"""Where each dialect keeps the conversation: errors about the prompt name the client's own field."""


class EngineFailure(ReefError):
    """The local model failed while answering (not the request's fault)."""

    status = 500
    type = "api_error"


@dataclasses.dataclass(frozen=True, slots=True)
class RequestSetup:
    """What the engine needs to know about a model to admit requests."""

    tokenizer: Any
    scheduler: Scheduler
    bindings: Bindings
    default_max_new_tokens: int
    max_positions: int


@dataclasses.dataclass(eq=False, slots=True)
class Submitted:
    """A request in flight: its chat form, its sequence in the scheduler and the queue its events arrive on."""

    dialect: Dialect
    chat: dict[str, Any]
    params: SamplingParams
    binding: Binding
    sequence: Sequence
    events: asyncio.Queue[Event]

    async def next_event(self) -> Event:
        try:
            return await self.events.get()
        except BaseException:
            self.sequence.cancelled = True  # the caller was cancelled (client gone): free the decoding slot
            raise


def submit(setup: RequestSetup, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Submitted:
    """Validate `body`, render its prompt, bind it to a release and queue it; raises BadRequest / Unavailable."""
    chat = to_chat(dialect, body)
    prompt_ids = prompt_ids_of(
        setup.tokenizer, chat, ctx.system_prompt, _CONVERSATION_FIELD[dialect], ctx.example_turns
    )
    params = sampling_params(chat, setup.default_max_new_tokens)
    room = setup.max_positions - len(prompt_ids)
    if room < 1:
        raise BadRequest(
            f"the prompt has {len(prompt_ids)} tokens; the model's context is {setup.max_positions}",
            _CONVERSATION_FIELD[dialect],
        )
    params = dataclasses.replace(params, max_new_tokens=min(params.max_new_tokens, room))
    binding = setup.bindings.for_request(ctx.scenario, ctx.release_id, _path(ctx.candidate_path))
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Event] = asyncio.Queue()

    def emit(event: Event) -> None:
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            sequence.cancelled = True

    sequence = Sequence(
        prompt_ids=prompt_ids,
        params=params,
        binding=binding,
        emit=emit,
        tracker=TextTracker(setup.tokenizer, params.stop),
        generator=None if params.seed is None else torch.Generator().manual_seed(params.seed),
        constraint=None if params.grammar is None else Constraint(setup.tokenizer, params.grammar),
    )
    setup.scheduler.submit(sequence)
    return Submitted(dialect, chat, params, binding, sequence, events)


def to_chat(dialect: Dialect, body: dict[str, Any]) -> dict[str, Any]:
    """The request, checked, as an OpenAI chat body (the engine's native form); raises BadRequest."""
    check_request(dialect, body)
    return convert_request(body, dialect, Dialect.CHAT)


def prompt_ids_of(
    tokenizer: Any,
    chat: dict[str, Any],
    system_prompt: str | None,
    field: str = "messages",
    example_turns: tuple[tuple[str, str], ...] = (),
) -> list[int]:
    """The prompt's token ids; a conversation the template cannot render is a BadRequest naming `field`."""
    messages = chat_messages(chat, system_prompt, field, example_turns)
    return render_prompt_ids(tokenizer, messages, chat.get("tools") or None, field=field)


def raise_failure(event: Failed) -> None:
    raise EngineFailure(event.message)


def _path(value: Path | str | None) -> Path | None:
    return None if value is None else Path(value)
