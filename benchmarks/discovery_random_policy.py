"""The random policy of `reef discover --control`, over many seeds: the distribution a trained search must beat.

The same archive (PUCT parent selection, two children kept per parent and step, 64 entries) and the same G × R grid
as the server's search; each attempt an edit drawn uniformly from the edits that apply to its parent and change it
(`Problem.useful_edits`), scored by the problem's own checker in this process (the edits are the problem's own, so
no sandbox is needed). No model and no server: a few seconds a seed.

Prints, per step, the median, the quartiles and the maximum of the best-so-far over the seeds.
Run: `.venv/bin/python benchmarks/discovery_random_policy.py --option n=6 --steps 15 --seeds 20 [--option moves=fine]`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reef.demo.discover import problem_option  # noqa: E402
from reef.discovery.archive import Archive, Attempt  # noqa: E402
from reef.discovery.problem import Problem, load_problem  # noqa: E402
from reef.discovery.problems import BUILTIN  # noqa: E402


def curve(problem: Problem, steps: int, groups: int, rollouts: int, seed: int) -> list[float]:
    """Best score after each step (the seed's first) of one random-policy search."""
    check = importlib.import_module(BUILTIN[problem.name]).evaluate  # the built-in's own checker, in this process
    rng = random.Random(f"random-policy:{seed}")

    def scored(solution: str) -> tuple[float, float, bool, str]:
        result = check(json.loads(solution), **problem.options)
        return result["score"], problem.reward(result["score"], result["valid"]), result["valid"], result["details"]

    first = problem.seeds[0]
    score, reward, valid, details = scored(first)
    archive = Archive.seeded([(first, score, reward, valid, details)])
    best = [archive.best().score or 0.0]
    for step in range(1, steps + 1):
        attempts = []
        for group, parent in enumerate(archive.select(groups)):
            menu = problem.useful_edits(parent.solution) or []
            for rollout in range(rollouts):
                solution = problem.extract(json.dumps(rng.choice(menu)), parent.solution) if menu else None
                if solution is None:
                    attempts.append(Attempt(parent.entry_id, group, rollout, None, None, 0.0, False))
                    continue
                score, reward, valid, details = scored(solution)
                attempts.append(Attempt(parent.entry_id, group, rollout, solution, score, reward, valid, details))
        archive.record(step, attempts)
        best.append(archive.best().score or 0.0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="circle-packing", choices=sorted(BUILTIN))
    parser.add_argument("--option", action="append", default=[], help="problem option KEY=VALUE")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--grid", default="4x4", help="G x R: parents a step, attempts a parent")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    problem = load_problem(args.problem, dict(problem_option(text) for text in args.option))
    groups, rollouts = (int(x) for x in args.grid.lower().split("x"))
    curves = [curve(problem, args.steps, groups, rollouts, seed) for seed in range(args.seeds)]
    print(f"{problem.name} {problem.options} · grid {groups}x{rollouts} · random policy over {args.seeds} seeds")
    print(f"{'step':>4}  {'median':>7}  {'q1':>6}  {'q3':>6}  {'max':>6}")
    for step in range(args.steps + 1):
        values = sorted(c[step] for c in curves)
        q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
        print(f"{step:>4}  {statistics.median(values):>7.3f}  {q1:>6.3f}  {q3:>6.3f}  {max(values):>6.3f}")


if __name__ == "__main__":
    main()
