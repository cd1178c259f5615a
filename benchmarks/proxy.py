"""Proxy + durable recording throughput: the fake upstream alone vs through Reef (SQLite, fsync'd records).

Prints, for 16 concurrent connections and for one, non-streaming and streaming: req/s, p50 and p99 latency
directly against the upstream and through Reef, and the added p50 latency. Uses `wrk` (Debian package) as the
load generator because a Python client would eat the CPU it measures.
Run: `.venv/bin/python benchmarks/proxy.py [--duration-s 10]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef.storage.sql import SQLITE_FILENAME  # noqa: E402
from tests.fakes.reef_process import ReefProcess, free_port  # noqa: E402

LUA = """
wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-reef-scenario"] = "bench"
"""


def _unit_ms(value: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", value)
    if match is None:
        return float("nan")
    number, unit = match.groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def run_wrk(url: str, body: dict, duration_s: int, connections: int) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(LUA.format(body=json.dumps(body)))
    out = subprocess.run(
        [
            "wrk",
            f"-t{min(2, connections)}",
            f"-c{connections}",
            f"-d{duration_s}s",
            "--latency",
            "-s",
            script.name,
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _unit_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = _unit_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    answered = int(re.search(r"(\d+) requests in", out).group(1))
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "non_2xx": int(errors.group(1)) if errors else 0, "n": answered}


def start_upstream(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.upstream", "--port", str(port)],
        cwd=Path(__file__).resolve().parent.parent,
    )
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return process
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("fake upstream did not start")


def _records_stored(state: Path) -> int:
    """How many records scenario 'bench' holds (read from the SQLite file, after Reef stopped)."""
    with contextlib.closing(sqlite3.connect(state / SQLITE_FILENAME)) as db:
        return int(db.execute("SELECT count(*) FROM reef_records WHERE scenario = 'bench'").fetchone()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration-s", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("wrk is required: apt-get install wrk", file=sys.stderr)
        return 2
    upstream_port = free_port()
    upstream = start_upstream(upstream_port)
    state = Path(tempfile.mkdtemp(prefix="reef-bench-"))
    reef = ReefProcess(state, "--inference.upstream-url", f"http://127.0.0.1:{upstream_port}").start()
    try:
        path = "/v1/chat/completions"
        message = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        rows = []
        answered = 0
        for mode, body in (("non-streaming", message), ("streaming", {**message, "stream": True})):
            answered += run_wrk(reef.url + path, body, 2, args.connections)["n"]  # warm-up: scenario, connections
            for connections in (args.connections, 1):
                direct = run_wrk(f"http://127.0.0.1:{upstream_port}{path}", body, args.duration_s, connections)
                through = run_wrk(reef.url + path, body, args.duration_s, connections)
                answered += through["n"]
                rows.append((mode, connections, direct, through))
        print(f"\n{args.duration_s} s per run; Reef records every request durably (SQLite, fsync'd group commits)")
        print(f"{'mode':<15}{'conns':>6}  {'path':<10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>9}")
        for mode, connections, direct, through in rows:
            for name, r in (("upstream", direct), ("reef", through)):
                print(
                    f"{mode:<15}{connections:>6}  {name:<10}{r['rps']:>10.0f}{r['p50_ms']:>10.2f}"
                    f"{r['p99_ms']:>10.2f}{r['non_2xx']:>9}"
                )
            print(f"{mode:<15}{connections:>6}  {'added p50':<10}{'':>10}{through['p50_ms'] - direct['p50_ms']:>10.2f}")
        # With N closed-loop clients every request waits for the others' turns: p50 ≈ N / throughput (Little's law).
        print("at 16 connections the p50 is mostly queueing (≈ connections / req/s); 1 connection shows the hop itself")
    finally:
        reef.stop()
        upstream.terminate()
    # wrk counts the answers it read whole; a request cut by the end of a run may be recorded too (as incomplete).
    print(f"answered through Reef: {answered}; records stored in scenario 'bench': {_records_stored(state)}")
    shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
