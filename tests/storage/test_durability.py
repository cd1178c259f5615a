"""A store killed with SIGKILL under load still holds every record it acknowledged (SQLite, fsync'd commits)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from reef.storage import open_record_store

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
    child.send_signal(signal.SIGKILL)
    child.wait()
    # Receipts printed after our last read were acknowledged too; read them as the client would have.
    for line in child.stdout.read().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():  # a line torn by the kill was never a whole receipt
            acked[parts[0]] = int(parts[1])

    store = open_record_store("sqlite", directory=tmp_path)
    try:
        stored = store.get_many(list(acked))
        assert {rid: r.sequence for rid, r in stored.items()} == acked
        # Whatever committed after the last receipt is there too, and sequences have no holes.
        everything = store.page("crash", limit=1_000_000)
        assert [r.sequence for r in everything] == list(range(1, len(everything) + 1))
    finally:
        store.close()
