"""Incremental detokenization with stop strings: how much of a completion's text is safe to emit so far."""

from __future__ import annotations

from typing import Any


class TextTracker:
    """Follows one completion's token ids; each `push` returns the new text that can be sent to the client.

    Text that might be the start of a stop string, or an incomplete UTF-8 sequence, is held back until the next
    token settles it. When a stop string appears, `stopped` turns true and the text ends before it.
    """

    __slots__ = ("_tokenizer", "_stops", "_ids", "_emitted", "text", "stopped")

    def __init__(self, tokenizer: Any, stops: tuple[str, ...]) -> None:
        self._tokenizer = tokenizer
        self._stops = stops
        self._ids: list[int] = []
        self._emitted = 0
        self.text = ""
        self.stopped = False

    def push(self, token_id: int) -> str:
        """Add one token; return the newly settled text (possibly empty)."""
        self._ids.append(token_id)
        # Decoding the whole completion each step keeps multi-token characters and merges right; completions
        # are short enough that this costs microseconds.
        text = self._tokenizer.decode(self._ids, skip_special_tokens=True)
        for stop in self._stops:
            at = text.find(stop, max(0, self._emitted - len(stop)))
            if at >= 0:
                text, self.stopped = text[:at], True
        self.text = text
        safe = len(text) if self.stopped else self._settled_length(text)
        delta = text[self._emitted : safe] if safe > self._emitted else ""
        self._emitted = max(self._emitted, safe)
        return delta

    def flush(self) -> str:
        """The text still held back, at the end of the completion."""
        delta = self.text[self._emitted :]
        self._emitted = len(self.text)
        return delta

    def _settled_length(self, text: str) -> int:
        end = len(text)
        if text.endswith("\ufffd"):
            end -= 1
        held = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, end), 0, -1):
                if text[end - size : end] == stop[:size]:
                    held = max(held, size)
                    break
        return end - held
