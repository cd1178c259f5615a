"""The best sums of radii this project has found for circle packing with small n (the `best_known` table).

Multi-start SLSQP (scipy) on n circles in the unit square, maximising the sum of the radii; every result is shrunk
by 1e-9 and checked by the problem's own `evaluate`, so no value rests on the checker's tolerance. These are best
*found* values (lower bounds on the optimum), not a literature table. Needs numpy and scipy, which Reef does not
depend on: `pip install scipy`, then `python scripts/circle_packing_best.py --starts 1000 --seed 7 2 3 4 5 6`.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from reef.discovery.problems import circle_packing


def best_found(n: int, starts: int, seed: int) -> tuple[float, list[list[float]]]:
    """The largest sum of radii over `starts` SLSQP runs from random centres, and its circles."""
    import numpy as np
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations(range(n), 2))

    def constraints(v: Any) -> Any:
        x, y, r = v[0::3], v[1::3], v[2::3]
        separation = [np.hypot(x[i] - x[j], y[i] - y[j]) - r[i] - r[j] for i, j in pairs]
        return np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r, np.array(separation), r])

    best: tuple[float, list[list[float]]] = (0.0, [])
    for _ in range(starts):
        start = np.ravel([[rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), 0.05] for _ in range(n)])
        found = minimize(
            lambda v: -v[2::3].sum(),
            start,
            method="SLSQP",
            constraints=[{"type": "ineq", "fun": constraints}],
            options={"maxiter": 500, "ftol": 1e-12},
        )
        if found.success and constraints(found.x).min() > -1e-9 and -found.fun > best[0]:
            circles = [[float(a), float(b), float(c) - 1e-9] for a, b, c in found.x.reshape(n, 3)]
            best = (float(-found.fun), circles)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="+", help="numbers of circles")
    parser.add_argument("--starts", type=int, default=300, help="random starts per n (300)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    args = parser.parse_args()
    print(f"{'n':>3} {'best found':>11} {'checked':>8}")
    for n in args.n:
        value, circles = best_found(n, args.starts, args.seed)
        check = circle_packing.evaluate(circles, n=n)
        print(f"{n:>3} {value:>11.6f} {check['valid']!s:>8}")


if __name__ == "__main__":
    main()
