"""The demo's `reef serve` child never outlives the demo that started it, however the demo dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A demo stand-in: starts a long-lived "server" through ReefServer, prints its pid, then waits to be killed.
DEMO = """
import sys, time
from pathlib import Path
from reef.demo.server import ReefServer
server = ReefServer([sys.executable, "-c", "import time; time.sleep(600)"], "http://127.0.0.1:9", Path(sys.argv[1]))
server.start()
print(server._process.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone too: it runs nothing; its reaper (init here) collects it.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_server_is_stopped_when_its_demo_is_killed(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    demo = subprocess.Popen(
        [sys.executable, "-c", DEMO, str(tmp_path / "serve.log")], stdout=subprocess.PIPE, text=True, cwd=root
    )
    assert demo.stdout is not None
    server_pid = int(demo.stdout.readline())
    assert not _gone(server_pid)
    demo.send_signal(signal.SIGKILL)
    demo.wait(timeout=30)
    deadline = time.monotonic() + 30
    while not _gone(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(server_pid), "the server outlived its demo"
