"""Circle packing: n circles inside the unit square, not overlapping; maximise the sum of their radii.

A solution is JSON `[[x, y, r], …]` with exactly n triples. Stdlib only: this file runs inside the sandbox.

The model answers with an edit of its parent by default (`answer="edit"`): `{"circle": i, "change": c}`, where
`grow` makes circle i as large as the walls and the other circles allow (its radius rounded down to 2 decimals, so a
grown circle touches something but never overlaps it) and `left`/`right`/`up`/`down` move its centre by MOVE_STEP
(`moves="coarse"`, the default) and then fit it: its radius becomes what the space at the new place allows, larger
or smaller. A move alone, keeping the radius, would score the same as its parent or overlap; moving and fitting is
the step a search can climb with (at a packing where every circle touches something, `grow` changes nothing and only
moves do). A small model rarely writes a list of numbers that differs from its parent by a small deliberate change;
it can choose an edit.
`answer="list"` asks for the whole list of n triples instead.

`moves="fine"` offers each move at FINE_STEPS (`"left 0.02"`, …): 17 changes a circle instead of 5. With 5 changes
and n = 6 there are at most 30 edits, which random picking covers within a few steps; the finer menu gives a
policy's choice more room to matter.
"""

from __future__ import annotations

import math
from typing import Any

NAME = "circle-packing"
DIRECTION = "max"
SOLUTION_FORMAT = "json"
OPTIONS: dict[str, Any] = {"n": 6, "answer": "edit", "moves": "coarse"}
TOLERANCE = 1e-9
MOVE_STEP = 0.05
FINE_STEPS = (0.01, 0.02, 0.05, 0.1)
CHANGES = ("grow", "left", "right", "up", "down")
_DIRECTIONS = {"left": (-1.0, 0.0), "right": (1.0, 0.0), "up": (0.0, 1.0), "down": (0.0, -1.0)}


def changes(moves: str = "coarse") -> tuple[str, ...]:
    """The changes an edit may name: CHANGES (`coarse`), or grow and each direction at each of FINE_STEPS (`fine`)."""
    if moves == "coarse":
        return CHANGES
    if moves == "fine":
        return ("grow", *(f"{direction} {step}" for direction in _DIRECTIONS for step in FINE_STEPS))
    raise ValueError(f"moves must be 'coarse' or 'fine', not {moves!r}")


def _offset(change: str) -> tuple[float, float]:
    """(dx, dy) of a move: `left` (by MOVE_STEP) or `left 0.02`."""
    direction, _, step = change.partition(" ")
    dx, dy = _DIRECTIONS[direction]
    size = float(step) if step else MOVE_STEP
    return dx * size, dy * size


def PROMPT(  # noqa: N802 (the problem format's name for the template)
    n: int = 6, answer: str = "edit", moves: str = "coarse"
) -> str:
    """Short and concrete, for a small model: it sees the whole parent and is asked for one edit of it (or, with
    `answer="list"`, for the whole edited list)."""
    shown = (
        "Here is a JSON list of {n} circles [x, y, r] packed in the unit square, sum of radii {score} ({better} is "
        "better).\nChecker: {evaluator_tail}\n{solution}\n"
    )
    if answer == "list":
        return shown + (
            "Make one circle a little bigger, or move circles, so that none overlap and all stay inside the square. "
            "Write the whole new list of exactly {n} circles only."
        )
    steps = f"by {MOVE_STEP}" if moves == "coarse" else "by " + ", ".join(map(str, FINE_STEPS))
    return shown + (
        "The circles are numbered 0 to {last} in the list's order. Choose one circle and one change: grow (it "
        f"becomes as large as the space around it allows) or move it {steps} left, right, up or down (it then "
        "becomes as large as the space at its new place allows), so that the sum of radii becomes larger."
    ).replace("{last}", str(n - 1))


def task(n: int = 6, answer: str = "edit", moves: str = "coarse") -> str:
    """What the model is asked."""
    answer_with = (
        f"a JSON list of {n} triples [x, y, r] (centre x, centre y, radius), numbers with 2 decimals"
        if answer == "list"
        else "one edit of the current packing: a circle to grow or to move"
    )
    return (
        f"Place {n} circles inside the unit square [0,1]x[0,1] so that no two overlap and every circle lies "
        f"fully inside the square. Maximise the sum of the radii. Answer with {answer_with}."
    )


def seeds(n: int = 6, answer: str = "edit", moves: str = "coarse") -> list[str]:
    """A plain grid: ceil(sqrt(n)) columns, equal circles as large as the grid's cells allow."""
    columns = math.ceil(math.sqrt(n))
    rows = math.ceil(n / columns)
    radius = math.floor(0.5 / max(rows, columns) * 100) / 100  # rounded down: rounding up would overlap
    circles = [
        [round((i % columns + 0.5) / columns, 2), round((i // columns + 0.5) / rows, 2), radius] for i in range(n)
    ]
    return [_compact(circles)]


def solution_schema(n: int = 6, answer: str = "edit", moves: str = "coarse") -> dict[str, Any]:
    """The answer's shape: n triples [x, y, r] with 2 decimals. The bounds are only what every valid packing meets
    (0 < r <= 1/2, so 0 < x, y < 1): the schema never excludes a valid answer; overlaps and walls are `evaluate`'s."""
    centre = {"type": "number", "minimum": 0.01, "maximum": 0.99, "multipleOf": 0.01}
    radius = {"type": "number", "minimum": 0.01, "maximum": 0.5, "multipleOf": 0.01}
    circle = {"type": "array", "prefixItems": [centre, centre, radius], "items": False, "minItems": 3}
    return {"type": "array", "items": circle, "minItems": n, "maxItems": n}


def edit_schema(n: int = 6, answer: str = "edit", moves: str = "coarse") -> dict[str, Any] | None:
    """One edit `{"circle": i, "change": c}` (`answer="edit"`), or None: the model writes whole lists."""
    menu = changes(moves)  # an unknown `moves` is refused whatever the answer
    if answer == "list":
        return None
    if answer != "edit":
        raise ValueError(f"answer must be 'edit' or 'list', not {answer!r}")
    return {
        "type": "object",
        "properties": {
            "circle": {"type": "integer", "enum": list(range(n))},
            "change": {"type": "string", "enum": list(menu)},
        },
        "required": ["circle", "change"],
        "additionalProperties": False,
    }


def apply_edit(solution: Any, edit: Any, n: int = 6, answer: str = "edit", moves: str = "coarse") -> list[list[float]]:
    """`solution` with `edit` applied (module docstring); ValueError for an edit that names no circle or change, or
    a move that leaves no room for the circle (its centre past a wall or inside another circle)."""
    menu = changes(moves)
    if not isinstance(edit, dict) or edit.get("change") not in menu:
        raise ValueError(f"an edit is {{'circle': 0..{n - 1}, 'change': one of {', '.join(menu)}}}")
    index = edit.get("circle")
    if not isinstance(solution, list) or not isinstance(index, int) or not 0 <= index < len(solution):
        raise ValueError(f"edit.circle must be a circle's index, 0 to {n - 1}")
    circles = [[float(v) for v in circle] for circle in solution]
    x, y, r = circles[index]
    if edit["change"] == "grow":
        circles[index][2] = max(r, _room(circles, index))
        return circles
    dx, dy = _offset(edit["change"])
    circles[index][:2] = [round(x + dx, 2), round(y + dy, 2)]
    circles[index][2] = _room(circles, index)
    if circles[index][2] <= 0:
        raise ValueError(f"moving circle {index} {edit['change']} leaves it no room")
    return circles


def _room(circles: list[list[float]], index: int) -> float:
    """The largest radius circle `index` can have at its centre, rounded down to 2 decimals (so it never overlaps)."""
    x, y, _ = circles[index]
    others = [math.hypot(x - a, y - b) - c for i, (a, b, c) in enumerate(circles) if i != index]
    return math.floor(min([x, 1 - x, y, 1 - y, *others]) * 100 + 1e-7) / 100


# The best sums of radii found here (scripts/circle_packing_best.py: multi-start SLSQP, the same values from seeds
# 0 and 3 with 300 starts and, for n = 3 and 6, seed 7 with 1000; each packing checked by `evaluate`): lower bounds on
# the optimum, not a literature table. n = 2 is 2 − √2, two equal circles in opposite corners.
BEST_FOUND = {1: 0.5, 2: 0.585786, 3: 0.796287, 4: 1.006788, 5: 1.103553, 6: 1.202839}
BEST_KNOWN_SOURCE = (
    "best found by this project for n <= 6 (multi-start SLSQP, scripts/circle_packing_best.py; checked by evaluate), "
    "not a literature value; E. Friedman's table, Circles in Squares (largest sum of radii), "
    "https://erich-friedman.github.io/packing/cirRsqu/, could not be read from here"
)


def best_known(n: int = 6, answer: str = "edit", moves: str = "coarse") -> float | None:
    """The best sum found for n <= 6 (BEST_KNOWN_SOURCE), None beyond: no value is claimed that was not checked."""
    return BEST_FOUND.get(n)


def evaluate(solution: Any, n: int = 6, answer: str = "edit", moves: str = "coarse") -> dict[str, Any]:
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
