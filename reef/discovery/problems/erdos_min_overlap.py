"""Erdős' minimum overlap problem, discretised: a step function h on [0, 2] with m steps, values in [0, 1],
∫h = 1; minimise the bound M(h) = max_k ∫ h(x) (1 − h(x + k)) dx over shifts k (one step apart).

A solution is JSON `[h_1, …, h_m]`; it is rescaled so that ∫h = 1 (values must stay within [0, 1] afterwards).
The best known bound is about 0.380924 (TTT-Discover, 2026; AlphaEvolve 0.380924, Haugland 0.380927), reached
with hundreds of steps; with few steps far less is reachable. Stdlib only: this file runs inside the sandbox.
"""

from __future__ import annotations

import json
import math
from typing import Any

NAME = "erdos-min-overlap"
DIRECTION = "min"
SOLUTION_FORMAT = "json"
OPTIONS: dict[str, Any] = {"m": 8}
TOLERANCE = 1e-9


def task(m: int = 8) -> str:
    """What the model is asked."""
    return (
        f"Find a step function h on [0,2] with {m} equal steps and values in [0,1] whose integral is 1, minimising "
        "the maximum over shifts k of the overlap integral of h(x)*(1-h(x+k)). Answer with a JSON list of "
        f"{m} numbers (the step values, at most 4 decimals)."
    )


def seeds(m: int = 8) -> list[str]:
    """The constant function 1/2 (its bound is 1/2)."""
    return [json.dumps([0.5] * m, separators=(",", ":"))]


def solution_schema(m: int = 8) -> dict[str, Any]:
    """The answer's shape: m step values in [0, 1] with at most 4 decimals."""
    number = {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.0001}
    return {"type": "array", "items": number, "minItems": m, "maxItems": m}


BEST_KNOWN_SOURCE = "TTT-Discover (2026) 0.380924; AlphaEvolve 0.380924; Haugland (2016) 0.380927 (continuous problem)"


def best_known(m: int = 8) -> float | None:
    """The best known bound for the continuous problem (a lower limit of what m steps can reach)."""
    return 0.380924


def evaluate(solution: Any, m: int = 8) -> dict[str, Any]:
    """{score: the bound M(h) (lower is better), valid, details}."""
    if not isinstance(solution, list) or len(solution) != m:
        return _invalid(f"expected a list of {m} numbers")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in solution):
        return _invalid("every step value must be a finite number")
    dx = 2.0 / m
    total = sum(solution) * dx
    if total <= 0:
        return _invalid("the integral of h must be positive")
    h = [v / total for v in solution]
    if min(h) < -TOLERANCE or max(h) > 1 + TOLERANCE:
        return _invalid("after scaling to integral 1 the values leave [0, 1]")
    # 1 − h is the density of the complement inside [0, 2] only: outside it the integrand is 0.
    bound = max(sum(h[i] * (1 - h[i + k]) for i in range(m) if 0 <= i + k < m) * dx for k in range(-m + 1, m))
    return {"score": bound, "valid": True, "details": f"valid, bound {bound:.6f}"}


def _invalid(reason: str) -> dict[str, Any]:
    return {"score": 0.0, "valid": False, "details": reason}
