"""How much the learning loop itself costs, apart from training and the model.

Real SQLite record store, real git release store and commit log; the fake dict engine and fake training
backend from `tests/fakes` stand in for the model, so the figures are the loop's own overhead:
scenario creation, one full step (batch → candidate → paired evaluation → publish → commit → activate →
mark consumed), and a restart's resume over many records.

    python benchmarks/learning_loop.py [--steps 20] [--records 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef.core.records import Record  # noqa: E402
from tests.fakes.learning_world import QUESTIONS, make_world  # noqa: E402


def row(name: str, samples_s: list[float], note: str = "") -> str:
    p50 = statistics.median(samples_s) * 1000
    worst = max(samples_s) * 1000
    return f"| {name:<44} | {len(samples_s):>5} | {p50:>9.1f} | {worst:>9.1f} | {note}"


async def main(steps: int, record_count: int) -> None:
    lines = ["| what | n | p50 ms | max ms | note", "|---|---|---|---|---"]
    questions = list(QUESTIONS)
    with tempfile.TemporaryDirectory(prefix="reef-bench-") as scratch:
        root = Path(scratch)
        world = make_world(root, batch_size=4)
        await world.runtime.start()

        creations = []
        for index in range(10):
            started = time.perf_counter()
            await world.runtime.ensure_scenario(f"s{index}")
            creations.append(time.perf_counter() - started)
        lines.append(row("create a scenario (records + base release)", creations, "sequential"))

        started = time.perf_counter()
        await asyncio.gather(*(world.runtime.ensure_scenario(f"burst{i}") for i in range(20) for _ in range(5)))
        lines.append(row("100 concurrent first requests, 20 new names", [time.perf_counter() - started], "total"))

        await world.runtime.ensure_scenario("math")
        step_times, verdicts = [], []
        for index in range(steps):
            for offset in range(4):
                question = questions[(index + offset) % len(questions)]
                world.report("math", question, QUESTIONS[question] if index % 2 == 0 else "wrong")
            started = time.perf_counter()
            commit = await world.runtime.step("math")
            step_times.append(time.perf_counter() - started)
            verdicts.append(commit["verdict"])
        note = f"{verdicts.count('published')} published, {verdicts.count('rejected')} rejected; 4 tasks"
        lines.append(row("one learner step, batch of 4", step_times, note))

        payloads = [{"feedback": {"prompt": "p", "answer": "a"}} for _ in range(record_count)]
        for chunk in range(0, record_count, 1000):
            world.records.append(
                [Record.new("math", "report", p, created_at=time.time()) for p in payloads[chunk : chunk + 1000]]
            )
        await world.runtime.stop()
        world = world.restart()
        started = time.perf_counter()
        await world.runtime.start()
        ready = world.runtime.status()["scenarios"]["math"]["ready"]
        lines.append(
            row(
                f"restart: resume over {record_count} records",
                [time.perf_counter() - started],
                f"{ready} units buffered, {len(world.runtime.status()['scenarios'])} scenarios activated",
            )
        )
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--records", type=int, default=20000)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.steps, arguments.records))
