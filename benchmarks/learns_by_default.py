"""Does `reef serve --inference.model-path smollm2 --learning.recipe sft`, with no other flag, learn a user's task?

`--model-path` serves another model instead (a `.gguf` file or a model directory), measured against its own base.

A user's own task family (none of the demo's: which animal a sentence mentions, the first word of a phrase, the
plural of a noun; train and held-out instances drawn from disjoint word pools) is fed to a fresh server in
rounds: the prompts go through `/v1/chat/completions`, each answer gets a report with the right answer as its
demonstration. The server is given no tasks: its gate holds out part of these reports itself. Before the first
round and after each one (once the learner is idle), the held-out exact match is measured through the API on
prompts never reported. Prints one row per round and a JSON summary.

    python benchmarks/learns_by_default.py [--rounds 3] [--per-round 32] [--port 8900] [--model-path smollm2]
        [--serve-flags "..."]

`--port` is the one flag it may add (`--reef.port`), when 8900 is taken; the state lives in a fresh directory
that is the server's working directory, so the default `--storage.dir .reef` is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path

from reef.demo.api import ReefAPI
from reef.demo.server import ReefServer
from reef.demo.tasks import DemoTask

SCENARIO = "my-tasks"
MAX_TOKENS = 24  # the user's client asks for short answers; enough for a sentence around the answer
POOLS = {
    "train": {
        "animal": "cat dog horse cow goat lion tiger bear rabbit duck eagle frog snake shark monkey zebra",
        "noun": "apple chair table river window bottle pencil candle garden rocket ticket basket flower bucket "
        "mirror ladder pocket hammer blanket wallet",
        "word": "green happy quick silent bright heavy gentle broken golden narrow tall sweet",
    },
    "test": {
        "animal": "owl hawk camel donkey parrot pigeon turtle beaver otter falcon",
        "noun": "lamp button carpet pillow engine jacket magnet napkin",
        "word": "purple lazy brave humble noisy rapid hollow fuzzy",
    },
}
SENTENCES = ("Last night a {} walked past the house.", "We saw a {} at the farm.", "A {} was sleeping in the sun.")


def family_tasks(split: str, count: int, seed: int) -> list[DemoTask]:
    """`count` distinct tasks of the user's family, cycling through its three kinds."""
    rng = random.Random(f"{seed}:{split}")
    pools = {name: words.split() for name, words in POOLS[split].items()}
    tasks: list[DemoTask] = []
    seen: set[str] = set()
    for _ in range(count * 1000):
        if len(tasks) == count:
            return tasks
        kind = len(tasks) % 3
        if kind == 0:
            animal = rng.choice(pools["animal"])
            task = DemoTask("animal", f"Which animal is mentioned: '{rng.choice(SENTENCES).format(animal)}'", animal)
        elif kind == 1:
            words = rng.sample(pools["word"], 3)
            task = DemoTask("first_word", f"What is the first word of this phrase: '{' '.join(words)}'?", words[0])
        else:
            noun = rng.choice(pools["noun"] + pools["animal"])
            task = DemoTask("plural", f"What is the plural of {noun}?", noun + "s")
        if task.prompt not in seen:
            seen.add(task.prompt)
            tasks.append(task)
    raise ValueError(f"the {split} pools hold fewer than {count} distinct tasks")


async def wait_idle(api: ReefAPI, quiet_s: float, timeout_s: float) -> dict:
    """Until the learner has nothing left to do (fewer ready units than a batch, no job) for `quiet_s`."""
    deadline = time.monotonic() + timeout_s
    quiet_since = None
    status: dict = {}
    while time.monotonic() < deadline:
        status = await api.status()
        idle = (status.get("job") or {}).get("state") == "idle" and status.get("ready", 0) < status.get("batch_size", 8)
        if idle:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= quiet_s:
                return status
        else:
            quiet_since = None
        await asyncio.sleep(1.0)
    return status


async def run(url: str, rounds: int, per_round: int, held_out: int, seed: int) -> dict:
    api = ReefAPI(url, SCENARIO)
    train = family_tasks("train", rounds * per_round, seed)
    test = family_tasks("test", held_out, seed)
    rows = []
    try:
        baseline = await api.measure(test, MAX_TOKENS)
        print(f"round 0: held-out exact {baseline.exact:.2f} (partial {baseline.partial:.2f})", flush=True)
        seen_steps = 0
        for number in range(rounds):
            started = time.monotonic()
            answers = await api.answer_all(train[number * per_round : (number + 1) * per_round], 0.0, MAX_TOKENS)
            for answer in answers:
                await api.report(float(answer.text.strip() == answer.task.answer), answer.receipt,
                                 {"demonstration": answer.task.answer})  # fmt: skip
            await asyncio.sleep(3.0)  # the learner polls every second
            status = await wait_idle(api, quiet_s=4.0, timeout_s=900.0)
            commits = await api.commits(seen_steps)
            seen_steps = max([seen_steps, *(c["step"] for c in commits)])
            measured = await api.measure(test, MAX_TOKENS)
            verdicts = [c["verdict"] for c in commits]
            gate = status.get("gate") or {}
            rows.append({
                "round": number + 1, "exact": measured.exact, "partial": measured.partial,
                "exact_ci95": measured.exact_ci95, "verdicts": verdicts, "gate": gate,
                "round_s": round(time.monotonic() - started, 1),
            })  # fmt: skip
            print(
                f"round {number + 1}: held-out exact {measured.exact:.2f} (partial {measured.partial:.2f}); "
                f"steps {verdicts}; gate {gate.get('source')} with {gate.get('tasks')} tasks; "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
    finally:
        await api.aclose()
    final = rows[-1]["exact"] if rows else baseline.exact
    return {"baseline": baseline.exact, "final": final, "gain": round(final - baseline.exact, 4), "rounds": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=32)
    parser.add_argument("--held-out", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--model-path", default="smollm2", help="the served model (`--inference.model-path`)")
    parser.add_argument("--serve-flags", default="", help="extra `reef serve` flags, to compare against the defaults")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="reef-learns-by-default-"))
    command = [sys.executable, "-m", "reef.cli.main", "serve", "--inference.model-path", args.model_path,
               "--learning.recipe", "sft"]  # fmt: skip
    if args.port != 8900:
        command += ["--reef.port", str(args.port)]
    command += shlex.split(args.serve_flags)
    print(f"$ {' '.join(command[2:])}   (in {state})", flush=True)
    server = ReefServer(command, f"http://127.0.0.1:{args.port}", state / "serve.log", cwd=state)
    started = time.monotonic()
    with server:
        server.wait_healthy(300.0)
        summary = asyncio.run(run(server.url, args.rounds, args.per_round, args.held_out, args.seed))
    summary["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
