"""Proxy + durable recording throughput: the fake upstream alone vs through Reef (SQLite, fsync'd records).

Prints, for 16 concurrent connections and for one, non-streaming and streaming: req/s, p50 and p99 latency
directly against the upstream and through Reef, and the added p50 latency. `--baseline-ref REF` measures that
commit's build in the same run (before/after a change); `--reference PATH` measures another Reef installation
(a virtual environment, or its `reef` command; made for the reference Reef 0.1.3, `pip install reef-infra==0.1.3`
into a Python 3.12 venv) on the same upstream and prints how many times its req/s this build reaches; `--tracing`
measures this build with OpenTelemetry spans exported to a local OTLP receiver, and prints the cost per request.
`--workers 1,2` measures `reef serve --reef.workers N` for each N in the same run ('vs reef' is then the gain over
one worker). Every row shows its req/s as a fraction of the upstream's own. Uses `wrk` (Debian package) as the
load generator because a Python client would eat the CPU it measures.
Run: `.venv/bin/python benchmarks/proxy.py [--duration-s 10] [--baseline-ref REF] [--reference PATH] [--tracing]
[--workers 1,2]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef.storage.sql import SQLITE_FILENAME  # noqa: E402
from tests.fakes.otlp_collector import OtlpCollector  # noqa: E402
from tests.fakes.reef_process import ReefProcess, free_port  # noqa: E402

PATH = "/v1/chat/completions"

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
    """One wrk run: req/s, p50/p99 latency, non-2xx answers and how many it read whole."""
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


def _process_tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds the processes have used so far (those gone count 0)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


@contextlib.contextmanager
def checkout(ref: str) -> Iterator[Path]:
    """A temporary `git worktree` of this repository at `ref` (the build a variant runs), removed afterwards."""
    root = Path(__file__).resolve().parent.parent
    path = Path(tempfile.mkdtemp(prefix="reef-baseline-"))
    subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(path), ref], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(path)], check=False)


@dataclass
class Variant:
    """One server to measure: this build (`cwd` None) or a checkout, with extra flags."""

    name: str
    flags: list[str] = field(default_factory=list)
    cwd: Path | None = None


def run_loads(url: str, pid: int, loads: list[tuple[str, dict, int]], duration_s: int) -> list[dict[str, float]]:
    """Each load against the server at `url` (process `pid`) once after a warm-up, with the cores its processes used."""
    runs = []
    for _mode, body, connections in loads:
        warm_up = run_wrk(url + PATH, body, 2, connections)  # the scenario, the connections
        processes = _process_tree(pid)  # every worker and the record writer
        used, started = _cpu_seconds(processes), time.monotonic()
        runs.append(run_wrk(url + PATH, body, duration_s, connections))
        runs[-1]["cores"] = (_cpu_seconds(processes) - used) / (time.monotonic() - started)
        runs[-1]["answered"] = warm_up["n"] + runs[-1]["n"]
    return runs


def measure(
    variant: Variant, upstream_port: int, loads: list[tuple[str, dict, int]], duration_s: int
) -> tuple[list[dict[str, float]], int]:
    """`variant` started on its own state, each load run once after a warm-up; its runs and records stored."""
    state = Path(tempfile.mkdtemp(prefix="reef-bench-"))
    upstream = ["--inference.upstream-url", f"http://127.0.0.1:{upstream_port}"]
    reef = ReefProcess(state, *upstream, *variant.flags, cwd=variant.cwd).start()
    try:
        assert reef.process is not None
        runs = run_loads(reef.url, reef.process.pid, loads, duration_s)
    finally:
        reef.stop()
    answered = int(sum(r["answered"] for r in runs))
    stored = _records_stored(state)
    shutil.rmtree(state, ignore_errors=True)
    # wrk counts the answers it read whole; a request cut by the end of a run may be recorded too (as incomplete).
    print(f"{variant.name}: answered {answered}, records stored {stored}", file=sys.stderr)
    return runs, stored


def reference_command(path: str) -> str:
    """The `reef` command of a reference installation: a virtual environment's `bin/reef`, or the command itself."""
    candidate = Path(path)
    if candidate.is_dir():
        candidate = candidate / "bin" / "reef"
    if not candidate.is_file():
        raise SystemExit(f"--reference: no reef command at {candidate}")
    return str(candidate)


def measure_reference(
    command: str, upstream_port: int, loads: list[tuple[str, dict, int]], duration_s: int
) -> list[dict[str, float]]:
    """The reference Reef (0.1.3's `reef serve` flags: record-only recipe in front of the upstream, SQLite records
    under its own state) on the same upstream and loads."""
    state = Path(tempfile.mkdtemp(prefix="reef-reference-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = [
        *("--inference.upstream-url", f"http://127.0.0.1:{upstream_port}", "--inference.upstream-model", "m"),
        *("--reef.port", str(port), "--reef.run-dir", str(state / "run")),
        *("--storage.agent-record-dir", str(state / "records")),
    ]
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # its own `reef`, not ours
    with open(state / "serve.log", "wb") as log:
        process = subprocess.Popen([command, "serve", *flags], stdout=log, stderr=subprocess.STDOUT, cwd=state, env=env)
    try:
        for _ in range(600):
            if process.poll() is not None:
                raise RuntimeError(f"the reference exited with {process.returncode}: see {state / 'serve.log'}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"the reference did not become healthy: see {state / 'serve.log'}")
        runs = run_loads(url, process.pid, loads, duration_s)
    finally:
        process.terminate()  # it stops the stack it started
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(state, ignore_errors=True)
    print(f"reference: answered {int(sum(r['answered'] for r in runs))}", file=sys.stderr)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration-s", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--baseline-ref", help="also measure this git ref's build (e.g. a commit before a change)")
    parser.add_argument(
        "--reference", help="also measure this Reef installation (a venv, or its reef command), e.g. Reef 0.1.3"
    )
    parser.add_argument("--tracing", action="store_true", help="also measure with OpenTelemetry spans exported")
    parser.add_argument("--workers", default="1", help="--reef.workers counts to measure, e.g. 1,2 (1 always is)")
    args = parser.parse_args()
    try:
        worker_counts = sorted({1, *(int(n) for n in args.workers.split(","))})
    except ValueError:
        print(f"--workers: expected comma-separated counts such as 1,2, got {args.workers!r}", file=sys.stderr)
        return 2
    if worker_counts[0] < 1:
        print("--workers: every count must be at least 1", file=sys.stderr)
        return 2
    reference = reference_command(args.reference) if args.reference else None
    if not shutil.which("wrk"):
        print("wrk is required: apt-get install wrk", file=sys.stderr)
        return 2
    upstream_port = free_port()
    upstream = start_upstream(upstream_port)
    message = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    loads = [
        (mode, body, connections)
        for mode, body in (("non-streaming", message), ("streaming", {**message, "stream": True}))
        for connections in (args.connections, 1)
    ]
    results: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        variants = [Variant("reef")]
        variants += [Variant(f"reef workers={n}", ["--reef.workers", str(n)]) for n in worker_counts[1:]]
        if args.tracing:
            # A real OTLP/HTTP receiver that only counts what it gets: the exporter's work is all Reef's.
            collector = stack.enter_context(OtlpCollector(keep_spans=False))
            variants.append(Variant("reef+tracing", ["--observability.otlp-endpoint", collector.url]))
        if args.baseline_ref:
            variants.insert(
                0, Variant(f"@{args.baseline_ref[:12]}", cwd=stack.enter_context(checkout(args.baseline_ref)))
            )
        try:
            results["upstream"] = [
                run_wrk(f"http://127.0.0.1:{upstream_port}{PATH}", body, args.duration_s, connections)
                for _mode, body, connections in loads
            ]
            for variant in variants:
                results[variant.name] = measure(variant, upstream_port, loads, args.duration_s)[0]
            if reference is not None:
                results["reference"] = measure_reference(reference, upstream_port, loads, args.duration_s)
        finally:
            upstream.terminate()
    print(f"\n{args.duration_s} s per run; Reef records every request durably (SQLite, fsync'd group commits)")
    print(f"{'mode':<15}{'conns':>6}  {'server':<16}{'req/s':>10}{'of up':>7}{'vs reef':>9}{'p50 ms':>9}"
          f"{'p99 ms':>9}{'+p50 ms':>9}{'non-2xx':>9}{'cores':>7}")  # fmt: skip
    for index, (mode, _body, connections) in enumerate(loads):
        direct, ours = results["upstream"][index], results["reef"][index]
        for name, runs in results.items():
            r = runs[index]
            ratio = "" if name == "upstream" else f"{r['rps'] / ours['rps']:.2f}"
            added = "" if name == "upstream" else f"{r['p50_ms'] - direct['p50_ms']:.2f}"
            cores = f"{r['cores']:.2f}" if "cores" in r else ""
            print(
                f"{mode:<15}{connections:>6}  {name:<16}{r['rps']:>10.0f}{r['rps'] / direct['rps']:>7.0%}{ratio:>9}"
                f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{added:>9}{r['non_2xx']:>9}{cores:>7}"
            )
        if "reference" in results:
            times = ours["rps"] / results["reference"][index]["rps"]
            print(f"{mode:<15}{connections:>6}  {'reef/reference':<16}{times:>9.1f}× the reference's req/s")
        if "reef+tracing" in results and connections == 1:
            # One connection, closed loop: the extra time per request is the difference of the mean latencies.
            traced = results["reef+tracing"][index]
            cost_us = (1 / traced["rps"] - 1 / ours["rps"]) * 1e6
            print(f"{mode:<15}{connections:>6}  {'tracing cost':<16}{cost_us:>9.0f} µs per request (1 / req/s)")
    # With N closed-loop clients every request waits for the others' turns: p50 ≈ N / throughput (Little's law).
    print("at 16 connections the p50 is mostly queueing (≈ connections / req/s); 1 connection shows the hop itself")
    print("'of up': req/s as a fraction of the upstream alone's; 'vs reef': req/s over this build's (one worker, no")
    print("tracing) in this run; '+p50': over the upstream alone; 'reference': the installation --reference names")
    print(
        f"'cores': CPU-seconds per second used by Reef's processes (workers + record writer) during the run; "
        f"{os.cpu_count()} cores here, load average now {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
