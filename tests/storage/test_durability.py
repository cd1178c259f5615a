"""A store killed with SIGKILL under load still holds every record it acknowledged (SQLite, fsync'd commits); its
writer process goes away with it; a writer process that dies is replaced and nothing acknowledged is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from reef.core.records import Record
from reef.storage import open_record_store
from reef.storage.group_commit import WriterStopped

_WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from reef.core.records import Record
    from reef.storage import open_record_store

    store = open_record_store("sqlite", directory=Path(sys.argv[1]))

    async def caller(c):
        for n in range(10**9):
            (acked,) = await store.append_async([Record.new("crash", "inference", {"c": c, "n": n}, time.time())])
            print(acked.agent_record_id, acked.sequence, flush=True)

    async def main():
        await asyncio.gather(*(caller(c) for c in range(16)))

    asyncio.run(main())
    """
)


def test_every_record_acknowledged_before_a_sigkill_is_readable_after_it(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=root
    )
    assert child.stdout is not None
    acked: dict[str, int] = {}
    for line in child.stdout:
        rid, sequence = line.split()
        acked[rid] = int(sequence)
        if len(acked) >= 500:
            break
    writers = _children_of(child.pid)
    assert writers, "the store runs its writer in a child process"
    child.send_signal(signal.SIGKILL)
    child.wait()
    # Receipts printed after our last read were acknowledged too; read them as the client would have.
    for line in child.stdout.read().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():  # a line torn by the kill was never a whole receipt
            acked[parts[0]] = int(parts[1])

    store = open_record_store("sqlite", directory=tmp_path)
    try:
        stored = store.get_many("crash", list(acked))
        assert {rid: r.sequence for rid, r in stored.items()} == acked
        # Whatever committed after the last receipt is there too, and sequences have no holes.
        everything = store.page("crash", limit=1_000_000)
        assert [r.sequence for r in everything] == list(range(1, len(everything) + 1))
    finally:
        store.close()
    # The writer process noticed its parent is gone and exited (after committing what it had).
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in writers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in writers)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_dead_writer_process_is_replaced_and_keeps_what_it_acknowledged(tmp_path: Path) -> None:
    store = open_record_store("sqlite", directory=tmp_path)
    try:
        (first,) = await store.append_async([Record.new("w", "inference", {"n": 1}, time.time())])
        pid = store.writer_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        # A call that catches the writer gone is told so (503: retry by id); the next one gets a new writer.
        for _ in range(2):
            try:
                (second,) = await store.append_async([Record.new("w", "inference", {"n": 2}, time.time())])
                break
            except WriterStopped:
                continue
        assert store.writer_pid not in (None, pid)
        assert second.sequence == 2
        assert store.get("w", first.agent_record_id) is not None
        assert [r.sequence for r in store.page("w")] == [1, 2]
    finally:
        store.close()


def test_a_blocking_caller_also_gets_a_new_writer(tmp_path: Path) -> None:
    store = open_record_store("sqlite", directory=tmp_path)
    try:
        store.append([Record.new("w", "inference", {"n": 1}, time.time())])
        os.kill(store.writer_pid or 0, signal.SIGKILL)
        time.sleep(0.5)  # the control channel's reader sees the writer's end
        (again,) = store.append([Record.new("w", "inference", {"n": 2}, time.time())])
        assert again.sequence == 2
    finally:
        store.close()
