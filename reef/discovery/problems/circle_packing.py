"""Circle packing: n circles inside the unit square, not overlapping; maximise the sum of their radii.

A solution is JSON `[[x, y, r], …]` with exactly n triples. Stdlib only: this file runs inside the sandbox.
"""

from __future__ import annotations

import math
from typing import Any

NAME = "circle-packing"
DIRECTION = "max"
SOLUTION_FORMAT = "json"
OPTIONS: dict[str, Any] = {"n": 6}
# Short and concrete, for a small model: it sees the whole parent and is asked for a small edit of it.
PROMPT = (
    "Here is a JSON list of {n} circles [x, y, r] packed in the unit square, sum of radii {score} ({better} is "
    "better).\nChecker: {evaluator_tail}\n{solution}\n"
    "Make one circle a little bigger, or move circles, so that none overlap and all stay inside the square. "
    "Write the whole new list of exactly {n} circles only."
)
TOLERANCE = 1e-9


def task(n: int = 6) -> str:
    """What the model is asked."""
    return (
        f"Place {n} circles inside the unit square [0,1]x[0,1] so that no two overlap and every circle lies "
        f"fully inside the square. Maximise the sum of the radii. Answer with a JSON list of {n} triples "
        "[x, y, r] (centre x, centre y, radius), numbers with 2 decimals."
    )


def seeds(n: int = 6) -> list[str]:
    """A plain grid: ceil(sqrt(n)) columns, equal circles as large as the grid's cells allow."""
    columns = math.ceil(math.sqrt(n))
    rows = math.ceil(n / columns)
    radius = math.floor(0.5 / max(rows, columns) * 100) / 100  # rounded down: rounding up would overlap
    circles = [
        [round((i % columns + 0.5) / columns, 2), round((i // columns + 0.5) / rows, 2), radius] for i in range(n)
    ]
    return [_compact(circles)]


def solution_schema(n: int = 6) -> dict[str, Any]:
    """The answer's shape: n triples [x, y, r] with 2 decimals. The bounds are only what every valid packing meets
    (0 < r <= 1/2, so 0 < x, y < 1): the schema never excludes a valid answer; overlaps and walls are `evaluate`'s."""
    centre = {"type": "number", "minimum": 0.01, "maximum": 0.99, "multipleOf": 0.01}
    radius = {"type": "number", "minimum": 0.01, "maximum": 0.5, "multipleOf": 0.01}
    circle = {"type": "array", "prefixItems": [centre, centre, radius], "items": False, "minItems": 3}
    return {"type": "array", "items": circle, "minItems": n, "maxItems": n}


BEST_KNOWN_SOURCE = (
    "E. Friedman, Circles in Squares (largest sum of radii), https://erich-friedman.github.io/packing/cirRsqu/ "
    "— not copied here: this machine could not read the table, so no value is claimed"
)


def best_known(n: int = 6) -> float | None:
    """None: the table named in BEST_KNOWN_SOURCE holds it, and we do not invent a value we could not check."""
    return None


def evaluate(solution: Any, n: int = 6) -> dict[str, Any]:
    """{score: sum of radii, valid, details}; an invalid packing scores 0 and says why."""
    if not isinstance(solution, list) or len(solution) != n:
        return _invalid(f"expected a list of {n} [x, y, r] triples")
    circles = []
    for index, circle in enumerate(solution):
        if not (isinstance(circle, list) and len(circle) == 3 and all(_is_number(v) for v in circle)):
            return _invalid(f"circle {index} is not [x, y, r] with three finite numbers")
        x, y, r = (float(v) for v in circle)
        if r <= 0:
            return _invalid(f"circle {index} has radius {r} <= 0")
        if x - r < -TOLERANCE or x + r > 1 + TOLERANCE or y - r < -TOLERANCE or y + r > 1 + TOLERANCE:
            return _invalid(f"circle {index} pokes out of the unit square")
        circles.append((x, y, r))
    for i in range(n):
        for j in range(i + 1, n):
            (xi, yi, ri), (xj, yj, rj) = circles[i], circles[j]
            if math.hypot(xi - xj, yi - yj) < ri + rj - TOLERANCE:
                return _invalid(f"circles {i} and {j} overlap")
    total = sum(r for _, _, r in circles)
    return {"score": total, "valid": True, "details": f"valid packing, sum of radii {total:.4f}"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _invalid(reason: str) -> dict[str, Any]:
    return {"score": 0.0, "valid": False, "details": reason}


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))
