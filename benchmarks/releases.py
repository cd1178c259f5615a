"""Release store latency: publish a 50-file harness tree and a 5 MB LoRA adapter, and materialize them.

Run: `python benchmarks/releases.py [--rounds 20]`. Each publish gets new content (one file changed), as a
learner's would; materialize is measured cold (a new release id, so nothing cached) and warm (cached).
Both repository kinds are measured: a local bare repo, and a second repo reached as a `file://` remote.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reef.releases import GitReleaseStore  # noqa: E402
from reef.releases.lfs import lfs_installed  # noqa: E402

ADAPTER_BYTES = 5 * 1024 * 1024


def harness_tree(root: Path, round_number: int) -> Path:
    """50 text files in a few folders (rules, skills, memory), ~2 KB each; one changes every round."""
    for index in range(50):
        folder = ("skills", "memory", "commands", "rules")[index % 4]
        path = root / folder / f"item-{index:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"# item {index}\n" + "Keep answers short and cite the task.\n" * 50
        path.write_text(text + (f"\nround {round_number}\n" if index == 0 else ""))
    return root


def adapter_tree(root: Path, round_number: int) -> Path:
    """A 5 MB `adapter_model.safetensors` (new bytes every round) and its small config."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "adapter_model.safetensors").write_bytes(os.urandom(ADAPTER_BYTES))
    (root / "adapter_config.json").write_text(f'{{"r": 16, "round": {round_number}}}')
    return root


def measure(
    store: GitReleaseStore, make: Callable[[Path, int], Path], scratch: Path, rounds: int
) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"publish": [], "materialize cold": [], "materialize warm": []}
    parent = store.head("bench")
    for round_number in range(rounds):
        content = make(scratch / f"content-{round_number}", round_number)
        started = time.perf_counter()
        release = store.publish("bench", content, parent.release_id if parent else None, step=round_number)
        timings["publish"].append(time.perf_counter() - started)
        started = time.perf_counter()
        store.materialize(release)
        timings["materialize cold"].append(time.perf_counter() - started)
        started = time.perf_counter()
        store.materialize(release)
        timings["materialize warm"].append(time.perf_counter() - started)
        parent = release
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"git-lfs installed: {lfs_installed()}; rounds: {args.rounds}; times in ms (p50 / p95 / max)\n")
    print(f"{'repository':<10} {'content':<22} {'operation':<18} {'p50':>8} {'p95':>8} {'max':>8}")
    for kind in ("local", "remote"):
        for label, make in (("harness, 50 files", harness_tree), ("adapter, 5 MB", adapter_tree)):
            with tempfile.TemporaryDirectory(prefix="reef-bench-") as temp_name:
                temp = Path(temp_name)
                repository = str(temp / "releases.git")
                if kind == "remote":
                    subprocess.run(["git", "init", "--quiet", "--bare", repository], check=True)
                    repository = (temp / "releases.git").as_uri()
                store = GitReleaseStore(repository, temp / "work")
                for operation, samples in measure(store, make, temp, args.rounds).items():
                    ms = sorted(1000 * s for s in samples)
                    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
                    print(
                        f"{kind:<10} {label:<22} {operation:<18} "
                        f"{statistics.median(ms):>8.1f} {p95:>8.1f} {ms[-1]:>8.1f}"
                    )
                # Sealed cache directories are read-only; let the temp dir cleanup remove them.
                for directory, _, _ in os.walk(temp):
                    os.chmod(directory, 0o755)


if __name__ == "__main__":
    main()
