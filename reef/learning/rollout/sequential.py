"""The rollout's sequential test: an always-valid confidence sequence on the difference of two arms' mean scores.

Scores are bounded (`rollout.score_min`..`score_max`) and rescaled to [0, 1] here, so each score minus its arm's
true mean is sub-Gaussian with variance factor 1/4 (Hoeffding's lemma). For a running sum S_n of n such centred
scores, Robbins' normal mixture

    M_n = sqrt(rho / (V_n + rho)) * exp(S_n**2 / (2 * (V_n + rho))),   V_n = n / 4,

is a nonnegative supermartingale with M_0 = 1, so by Ville's inequality P(exists n: M_n >= 1/a) <= a. Solving
M_n < 1/a for the mean gives the two-sided confidence sequence

    mean_n +- sqrt((V_n + rho) * log((V_n + rho) / (rho * a**2))) / n,

which covers the true mean at every n at once with probability >= 1 - a: it may be looked at after every
report, and stopped whenever it decides, without inflating the error (Howard, Ramdas, McAuliffe, Sekhon,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 2021). Each arm gets one at
level alpha/2; the difference of the two (candidate low minus incumbent high, candidate high minus incumbent
low) then covers the true difference at every moment with probability >= 1 - alpha (a union bound). The test
promotes once the difference's interval lies above 0 and rolls back once it lies below 0: when the arms are
equal, it decides either way with probability at most alpha however long it runs.

The mixture's `rho` only moves where the boundary is tightest (about `tight_at` reports per arm); any rho > 0
keeps the guarantee. All functions are pure and take plain numbers.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

Decision = Literal["promote", "rollback"]
TIGHT_AT_REPORTS = 100  # reports per arm where the boundary is tightest


@dataclasses.dataclass(frozen=True, slots=True)
class Tally:
    """An arm's evidence: how many scores it has and their sum, each score rescaled to [0, 1]."""

    n: int = 0
    total: float = 0.0

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def add(self, unit_score: float) -> Tally:
        return Tally(self.n + 1, self.total + unit_score)


def unit_score(score: float, score_min: float, score_max: float) -> float:
    """`score` clipped to [score_min, score_max] and rescaled to [0, 1]."""
    clipped = min(max(score, score_min), score_max)
    return (clipped - score_min) / (score_max - score_min)


def mixture_rho(alpha: float, tight_at: int = TIGHT_AT_REPORTS) -> float:
    """The normal mixture's precision that makes the boundary about tightest at `tight_at` observations."""
    log_term = 2 * math.log(1 / alpha)
    return (tight_at / 4) / (log_term + math.log(1 + log_term))


def radius(n: int, alpha: float, tight_at: int = TIGHT_AT_REPORTS) -> float:
    """Half the width of the level-`alpha` confidence sequence for a mean of `n` scores in [0, 1] (inf at n = 0)."""
    if n <= 0:
        return math.inf
    rho = mixture_rho(alpha, tight_at)
    variance = n / 4 + rho
    return math.sqrt(variance * math.log(variance / (rho * alpha * alpha))) / n


def mean_interval(tally: Tally, alpha: float) -> tuple[float, float]:
    """The arm's level-`alpha` interval for its mean, within [0, 1] (the whole of it before any score)."""
    if tally.n == 0:
        return (0.0, 1.0)
    mean, half = tally.total / tally.n, radius(tally.n, alpha)
    return (max(0.0, mean - half), min(1.0, mean + half))


def difference_interval(candidate: Tally, incumbent: Tally, alpha: float) -> tuple[float, float]:
    """A level-`alpha` interval for candidate mean minus incumbent mean, valid at every moment at once."""
    c_low, c_high = mean_interval(candidate, alpha / 2)
    i_low, i_high = mean_interval(incumbent, alpha / 2)
    return (c_low - i_high, c_high - i_low)


def decide(candidate: Tally, incumbent: Tally, alpha: float) -> Decision | None:
    """`promote` when the difference is surely above 0, `rollback` when surely below, else None (keep going)."""
    low, high = difference_interval(candidate, incumbent, alpha)
    if low > 0:
        return "promote"
    if high < 0:
        return "rollback"
    return None


def clearly_more(candidate: Tally, incumbent: Tally, alpha: float) -> bool:
    """Whether the candidate's rate (of errors: each request scores 1 if it failed) is surely above the
    incumbent's, by the same level-`alpha` confidence sequences."""
    low, _ = difference_interval(candidate, incumbent, alpha)
    return low > 0


def reports_for_power(difference: float, share: float, alpha: float, tight_at: int = TIGHT_AT_REPORTS) -> int:
    """The attributed reports by which a true difference of `difference` (on the [0, 1] scale) is decided with
    high probability: the first total N at which the two arms' radii (at `share` and `1 - share` of N) sum to at
    most half of it. From then on the test decides as soon as the observed difference is within half of the true
    one, which (Hoeffding) fails with probability at most 2 * exp(-N * share * (1 - share) * difference**2 / 8)
    at any given N."""
    if not 0 < difference <= 1:
        raise ValueError("difference must be in (0, 1]")
    total = 2
    while True:
        n_candidate = math.floor(total * share)
        n_incumbent = total - n_candidate
        if (
            n_candidate > 0
            and radius(n_candidate, alpha / 2, tight_at) + radius(n_incumbent, alpha / 2, tight_at) <= difference / 2
        ):
            return total
        total += max(1, total // 50)
