"""The server protocol's transport: what a connection writes in one event-loop turn leaves in one write."""

from __future__ import annotations

import asyncio
from typing import Any

from reef.service.server import _CoalescingTransport


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def test_writes_of_one_turn_leave_together_at_its_end() -> None:
    real = RecordingTransport()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b"")
    transport.write(b"body")
    assert real.writes == []
    assert transport.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\nbody")
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    transport.write(b"later")  # a write of a later turn is not held back behind the first
    await asyncio.sleep(0)
    assert real.writes[-1] == b"later"


async def test_closing_sends_what_is_pending_first_and_other_calls_pass_through() -> None:
    real = RecordingTransport()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.writelines([b"a", b"b"])
    transport.close()
    assert real.writes == [b"ab"] and real.closed
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
    await asyncio.sleep(0)
    assert real.writes == [b"ab"]  # the scheduled flush finds nothing more to send
