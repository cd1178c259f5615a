"""How the supervisor of `reef serve --reef.workers N` starts a worker (the command and what it inherits)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from reef.cli import workers
from reef.core.settings import ServerSettings, Settings


class Store:
    def __init__(self) -> None:
        self.others: list[socket.socket] = []

    def channel_for_process(self) -> socket.socket:
        mine, theirs = socket.socketpair()
        self.others.append(theirs)
        return mine


def test_each_worker_gets_its_own_writer_channel_port_and_replica_id(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []

    def popen(command: list[str], **options: Any) -> str:
        started.append({"command": command, **options})
        return "process"

    monkeypatch.setattr(workers.subprocess, "Popen", popen)
    settings = Settings(reef=ServerSettings(workers=2, replica_id="box"))
    supervisor = workers.Supervisor(settings, ["-c", str(Path("serve.yaml")), "--learning.recipe", "sft"])
    supervisor.port = 8123
    store = Store()
    for index in range(2):
        supervisor._spawn(store, index)
    first, second = started
    assert first["command"][3:] == ["serve", "-c", "serve.yaml", "--learning.recipe", "sft", "--reef.workers", "1",
                                    "--reef.port", "8123", "--reef.replica-id", "box/0"]  # fmt: skip
    assert second["command"][-1] == "box/1"
    for spawned in started:  # the writer channel's descriptor is inherited, and named in the environment
        assert spawned["pass_fds"] == (int(spawned["env"][workers.WRITER_FD_ENV]),)
    for sock in store.others:
        sock.close()


def test_without_a_replica_id_workers_keep_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr(workers.subprocess, "Popen", lambda command, **_: started.append(command))
    supervisor = workers.Supervisor(Settings(reef=ServerSettings(workers=2)), [])
    supervisor.port = 8123
    store = Store()
    supervisor._spawn(store, 0)
    assert "--reef.replica-id" not in started[0]  # each worker is then `<hostname>:<its pid>`
    for sock in store.others:
        sock.close()
