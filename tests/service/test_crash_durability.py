"""A SIGKILL of the server under concurrent load loses no record whose receipt a client received."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.e2e

SCENARIO = "crash"


def _client_loop(url: str, receipts: list[str], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        index = 0
        while not stop.is_set():
            index += 1
            try:
                if index % 3 == 0:
                    response = client.post(
                        "/reef/report", headers={"x-reef-scenario": SCENARIO}, json={"score": index % 5}
                    )
                    receipt = response.json().get("agent_record_id") if response.status_code == 200 else None
                else:
                    response = client.post(
                        "/v1/chat/completions",
                        headers={"x-reef-scenario": SCENARIO},
                        json={"model": "m", "messages": [{"role": "user", "content": f"n{index}"}]},
                    )
                    receipt = response.headers.get("x-reef-agent-record-id")
            except httpx.HTTPError:
                return  # the server is gone
            if receipt:
                receipts.append(receipt)


def test_every_receipt_a_client_received_is_readable_after_a_kill_9(upstream: FakeUpstream, tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = ReefProcess(state, "--inference.upstream-url", upstream.url).start()
    receipts: list[str] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_client_loop, args=(server.url, receipts, stop)) for _ in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(receipts) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()  # mid-load: requests are in flight
    stop.set()
    for thread in threads:
        thread.join(10)
    acknowledged = list(receipts)
    assert len(acknowledged) >= 100
    with (
        ReefProcess(state, "--inference.upstream-url", upstream.url, port=server.port) as again,
        httpx.Client(base_url=again.url) as client,
    ):
        missing = [r for r in acknowledged if client.get(f"/reef/scenarios/{SCENARIO}/records/{r}").status_code != 200]
    assert missing == []
