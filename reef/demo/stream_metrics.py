"""How a stream of lessons is scored, from its matrix of held-out scores (lesson taught × lesson measured).

`matrix[i][j]` is the held-out score of lesson `j` measured right after lesson `i` was taught (`j ≤ i`: every lesson
so far). The figures are those continual-learning evaluations report for a stream:

- learning curve: the mean score of the lessons taught so far, after each lesson (`mean_j matrix[i][j]`);
- forgetting of lesson `j`: its best score on the measurements before the last, minus its score at the last
  (`max_{j ≤ i < K-1} matrix[i][j] − matrix[K-1][j]`; none for the last lesson, measured once); positive is lost;
- transfer of lesson `j`: the stream's last score on it minus its score learned alone, where "alone" is the score
  measured right after it was taught (`matrix[K-1][j] − matrix[j][j]`; none for the last lesson, where they are the
  same measurement). It says what the later lessons did to it; below zero they took from it;
- final average: the mean of the last row; peak of lesson `j`: its best score on any measurement; and the final
  average over the mean peak (1.0: nothing the stream ever knew was lost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Matrix = Sequence[Sequence[float]]

TRANSFER_ALONE = "the score measured right after the lesson was taught"


def learning_curve(matrix: Matrix) -> list[float]:
    """The mean score of the lessons taught so far, after each lesson."""
    return [_round(sum(row) / len(row)) for row in matrix]


def peaks(matrix: Matrix) -> list[float]:
    """Each lesson's best score on any measurement after it was taught."""
    return [_round(max(matrix[i][j] for i in range(j, len(matrix)))) for j in range(len(matrix))]


def forgetting(matrix: Matrix) -> list[float | None]:
    """Per lesson: its best score before the last measurement minus its score at the last (None: the last lesson)."""
    last = len(matrix) - 1
    return [
        _round(max(matrix[i][j] for i in range(j, last)) - matrix[last][j]) if j < last else None
        for j in range(len(matrix))
    ]


def transfer(matrix: Matrix) -> list[float | None]:
    """Per lesson: the stream's last score on it minus its score right after it was taught (None: the last)."""
    last = len(matrix) - 1
    return [_round(matrix[last][j] - matrix[j][j]) if j < last else None for j in range(len(matrix))]


def final_average(matrix: Matrix) -> float | None:
    """The mean score of every lesson at the last measurement (None: no lesson was taught)."""
    return _round(sum(matrix[-1]) / len(matrix[-1])) if matrix else None


def mean_of(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are there (None when none is)."""
    present = [v for v in values if v is not None]
    return _round(sum(present) / len(present)) if present else None


def final_over_peak(matrix: Matrix) -> float | None:
    """The final average over the mean peak (None: nothing taught, or nothing ever learnt)."""
    final, peak = final_average(matrix), mean_of(list(peaks(matrix)))
    return _round(final / peak) if final is not None and peak else None


def stream_figures(matrix: Matrix) -> dict[str, Any]:
    """Every figure of a stream (on the lessons it measured, when it stopped early), as `--json` shows them."""
    lost, carried, best = forgetting(matrix), transfer(matrix), peaks(matrix)
    return {
        "matrix": [list(row) for row in matrix],
        "learning_curve": learning_curve(matrix),
        "forgetting": lost,
        "mean_forgetting": mean_of(lost),
        "transfer": carried,
        "mean_transfer": mean_of(carried),
        "peaks": best,
        "mean_peak": mean_of(list(best)),
        "final_average": final_average(matrix),
        "final_over_peak": final_over_peak(matrix),
    }


def _round(value: float) -> float:
    return round(value, 4)
