"""Durable appends per second through `append_async` (group commit), SQLite and PostgreSQL.

    python benchmarks/record_store.py [--appends 4000] [--postgres-url URL] [--no-postgres]

Each caller appends one ~1 KiB inference record at a time and awaits its durable receipt, like the server does.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from reef.core.records import Record
from reef.storage import SqlRecordStore, open_record_store

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _records(n: int) -> list[Record]:
    now = time.time()
    return [
        Record.new(
            "bench",
            "inference",
            {
                "request": {"model": "m", "messages": [{"role": "user", "content": f"question {i} " + "q" * 400}]},
                "response": {"choices": [{"message": {"role": "assistant", "content": "a" * 400}}]},
                "dialect": "chat",
                "timing": {"total_s": 0.01},
            },
            created_at=now + i * 1e-6,
        )
        for i in range(n)
    ]


async def _run(store: SqlRecordStore, callers: int, appends: int) -> dict[str, float]:
    pending = iter(_records(appends))
    latencies_s: list[float] = []

    async def caller() -> None:
        for record in pending:
            start = time.perf_counter()
            await store.append_async([record])
            latencies_s.append(time.perf_counter() - start)

    before = store.stats()
    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    elapsed_s = time.perf_counter() - start
    after = store.stats()
    latencies_s.sort()
    groups = after.groups - before.groups
    return {
        "appends_per_s": appends / elapsed_s,
        "p50_ms": statistics.median(latencies_s) * 1000,
        "p99_ms": latencies_s[int(len(latencies_s) * 0.99) - 1] * 1000,
        "mean_group": (after.appends - before.appends) / max(1, groups),
    }


def _bench(name: str, store: SqlRecordStore, appends: int) -> list[tuple[str, int, dict[str, float]]]:
    try:
        asyncio.run(_run(store, 4, 200))  # warm up: tables, caches, connections
        return [(name, callers, asyncio.run(_run(store, callers, appends))) for callers in (1, 16)]
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=4000, help="appends per measurement")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as directory:
        rows += _bench(
            "sqlite (WAL, synchronous=FULL)", open_record_store("sqlite", directory=Path(directory)), args.appends
        )
    if not args.no_postgres:
        schema = "reef_bench_" + uuid.uuid4().hex[:8]
        libpq_url = args.postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            store = open_record_store("postgres", database_url=args.postgres_url, schema=schema)
            rows += _bench("postgres (synchronous_commit=on)", store, args.appends)
        finally:
            with psycopg.connect(libpq_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    print(f"{'backend':34} {'callers':>7} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'group':>6}")
    for name, callers, result in rows:
        print(
            f"{name:34} {callers:>7} {result['appends_per_s']:>10.0f} {result['p50_ms']:>8.2f}"
            f" {result['p99_ms']:>8.2f} {result['mean_group']:>6.1f}"
        )


if __name__ == "__main__":
    main()
