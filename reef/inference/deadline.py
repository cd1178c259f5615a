"""A bound on a block of async work, for a known event loop (what `asyncio.timeout` does, cheaper)."""

from __future__ import annotations

import asyncio
from typing import Any


class Deadline:
    """`asyncio.timeout(seconds)` on a known event loop (None: no bound).

    `asyncio.timeout` looks the running loop up on entry and exit, and each lookup is a `getpid` system call,
    dear inside a VM, on every request of the hot path.
    """

    __slots__ = ("_loop", "_seconds", "_task", "_handle", "_fired", "_cancelling")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float | None) -> None:
        self._loop = loop
        self._seconds = seconds
        self._handle: asyncio.TimerHandle | None = None
        self._fired = False

    async def __aenter__(self) -> Deadline:
        if self._seconds is not None:
            task = asyncio.current_task(self._loop)
            assert task is not None, "Deadline is used inside a task"
            self._task = task
            self._cancelling = task.cancelling()
            self._handle = self._loop.call_later(self._seconds, self._fire)
        return self

    def _fire(self) -> None:
        self._fired = True
        self._task.cancel()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._fired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
