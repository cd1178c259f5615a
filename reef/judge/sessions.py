"""Sessions rebuilt from a scenario's inference records, and each turn's **next state**. Pure, no I/O.

A turn is one chat-dialect inference: the request's messages and the assistant's answer. Its session is:

- the `x-reef-tag-session` tag when the request carried one (then the session's next request follows it), or
- without a tag, the earlier turn whose messages + answer are a prefix of this request's messages (an agent that
  resends the conversation, as chat clients do); a request that extends no earlier turn starts a new session.

A turn's next state is the first user message or tool result that follows its answer in the session's next
request. A session expires after `ttl_s` seconds without a request (record time, so a replay after a restart
finds the same sessions); its last turn then has no next state and is reported by `expired()`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

NEXT_STATE_ROLES = ("user", "tool")


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One chat turn: its record, session, messages, the assistant's answer and when it was recorded."""

    record_id: str
    messages: tuple[dict[str, Any], ...]
    answer: dict[str, Any]
    created_at: float
    session_tag: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NextState:
    """What followed a turn: the message, the request that carried it, and the session."""

    turn: Turn
    message: dict[str, Any]
    record_id: str
    session: str


def message_text(message: dict[str, Any]) -> str:
    """A message's text: a string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def _canonical(message: dict[str, Any]) -> list[Any]:
    calls = message.get("tool_calls")
    return [message.get("role"), message_text(message), json.dumps(calls, sort_keys=True) if calls else None]


def conversation_key(messages: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> str:
    """A digest of a conversation (roles, texts, tool calls), so that a resent history matches its turn."""
    encoded = json.dumps([_canonical(m) for m in messages], ensure_ascii=False).encode()
    return hashlib.sha256(encoded).hexdigest()


def fresh_messages(messages: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The messages after the last assistant message (all of them when there is none)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return list(messages[last + 1 :])


class Sessions:
    """Finds each turn's session and next state as turns arrive in sequence order."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._by_conversation: dict[str, tuple[Turn, str]] = {}  # key of messages + answer -> (turn, session)
        self._last_by_tag: dict[str, Turn] = {}
        self._open: dict[str, Turn] = {}  # turns still waiting for their next state
        self._expired: list[Turn] = []
        self._now = 0.0

    def add(self, turn: Turn) -> NextState | None:
        """Place `turn` in its session; the next state it carries for an earlier turn of that session, if any."""
        self._now = max(self._now, turn.created_at)
        self._expire()
        found = self._tagged(turn) if turn.session_tag is not None else self._extended(turn)
        session = found[1] if found is not None else (turn.session_tag or turn.record_id)
        self._open[turn.record_id] = turn
        self._by_conversation[conversation_key((*turn.messages, turn.answer))] = (turn, session)
        if turn.session_tag is not None:
            self._last_by_tag[turn.session_tag] = turn
        if found is None:
            return None
        earlier, _, message = found
        if self._open.pop(earlier.record_id, None) is None:
            return None  # its next state came already (a retried request resends the same history)
        return NextState(earlier, message, turn.record_id, session)

    def expired(self) -> list[Turn]:
        """Turns whose session expired before their next state came (each reported once)."""
        found, self._expired = self._expired, []
        return found

    def waiting(self) -> int:
        """Turns still waiting for their next state."""
        return len(self._open)

    def forget(self, record_id: str) -> None:
        """Stop waiting on a turn (it was consumed another way, e.g. a report scored it)."""
        self._open.pop(record_id, None)

    def _tagged(self, turn: Turn) -> tuple[Turn, str, dict[str, Any]] | None:
        assert turn.session_tag is not None
        earlier = self._last_by_tag.get(turn.session_tag)
        if earlier is None:
            return None
        history = (*earlier.messages, earlier.answer)
        if len(turn.messages) > len(history) and conversation_key(turn.messages[: len(history)]) == conversation_key(
            history
        ):
            following = list(turn.messages[len(history) :])
        else:  # a client that sends only what is new
            following = fresh_messages(turn.messages)
        message = next((m for m in following if m.get("role") in NEXT_STATE_ROLES), None)
        return None if message is None else (earlier, turn.session_tag, message)

    def _extended(self, turn: Turn) -> tuple[Turn, str, dict[str, Any]] | None:
        messages = turn.messages
        for end in range(len(messages) - 1, 0, -1):
            if messages[end - 1].get("role") != "assistant" or messages[end].get("role") not in NEXT_STATE_ROLES:
                continue
            hit = self._by_conversation.get(conversation_key(messages[:end]))
            if hit is not None:
                return hit[0], hit[1], messages[end]
        return None

    def _expire(self) -> None:
        cutoff = self._now - self.ttl_s
        for record_id, turn in list(self._open.items()):
            if turn.created_at < cutoff:
                del self._open[record_id]
                self._expired.append(turn)
        for key, (turn, _) in list(self._by_conversation.items()):
            if turn.created_at < cutoff:
                del self._by_conversation[key]
        for tag, turn in list(self._last_by_tag.items()):
            if turn.created_at < cutoff:
                del self._last_by_tag[tag]
