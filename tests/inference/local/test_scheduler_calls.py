"""The engine thread's calls (one whose caller gave up is skipped, not fatal to the thread) and its hand-over of
tokens to the event loops before each forward."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from reef.inference.local import scheduler as scheduler_module
from reef.inference.local.scheduler import Scheduler


def test_a_cancelled_call_is_skipped_without_raising() -> None:
    ran: list[bool] = []
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    future.cancel()
    Scheduler._run_call(lambda: ran.append(True) or 1, future)
    assert ran == [] and future.cancelled()


def test_a_call_hands_back_its_result_or_its_exception() -> None:
    done: concurrent.futures.Future[int] = concurrent.futures.Future()
    Scheduler._run_call(lambda: 7, done)
    failed: concurrent.futures.Future[int] = concurrent.futures.Future()
    Scheduler._run_call(lambda: 1 // 0, failed)
    assert done.result() == 7 and isinstance(failed.exception(), ZeroDivisionError)


def test_a_forward_waits_until_the_loop_has_passed_on_the_tokens_emitted_before_it(monkeypatch) -> None:
    monkeypatch.setattr(scheduler_module, "SETTLE_S", 60.0)  # the order, not the bound, is under test
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    events: asyncio.Queue[str] = asyncio.Queue()
    sent: list[str] = []

    async def stream() -> None:  # a client's stream: takes each token off the queue and "sends" it
        while (token := await events.get()) != "end":
            sent.append(token)

    streaming = asyncio.run_coroutine_threadsafe(stream(), loop)
    engine = Scheduler(None, pad_id=0, eos_ids=set(), max_batch_size=1, max_queue=1, settle=True)  # type: ignore[arg-type]
    try:
        for token in ("a", "b", "c"):
            loop.call_soon_threadsafe(events.put_nowait, token)
            engine._emitted_to.add(loop)
            engine._settle()  # what the scheduler does before its next forward
            assert sent[-1] == token
    finally:
        loop.call_soon_threadsafe(events.put_nowait, "end")
        streaming.result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    loop.close()
    engine._emitted_to.add(loop)
    engine._settle()  # a closed loop is not waited for
