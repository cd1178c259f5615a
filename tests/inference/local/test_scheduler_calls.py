"""A call handed to the engine thread whose caller gave up is skipped, not fatal to the thread."""

from __future__ import annotations

import concurrent.futures

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
