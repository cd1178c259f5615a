"""The rollout's sequential test: valid under continuous monitoring (A/A), and powerful enough (A/B)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from reef.learning.rollout.sequential import Tally, decide, difference_interval, radius, reports_for_power, unit_score

ALPHA = 0.05


def simulate(rng: np.random.Generator, p_candidate: float, p_incumbent: float, share: float, reports: int) -> tuple:
    """One rollout of 0/1 scores, the test applied after every report: (decision or None, reports it took)."""
    on_candidate = rng.random(reports) < share
    scores = np.where(on_candidate, rng.random(reports) < p_candidate, rng.random(reports) < p_incumbent)
    n_c = np.cumsum(on_candidate)
    n_i = np.arange(1, reports + 1) - n_c
    s_c = np.cumsum(scores & on_candidate)
    s_i = np.cumsum(scores & ~on_candidate)
    for t in range(reports):
        decision = decide(Tally(int(n_c[t]), float(s_c[t])), Tally(int(n_i[t]), float(s_i[t])), ALPHA)
        if decision is not None:
            return decision, t + 1
    return None, reports


@functools.cache
def _radii(reports: int) -> np.ndarray:
    """`radius(n, alpha / 2)` for n = 0 .. reports, the test's own function looked up instead of called per report."""
    return np.array([radius(n, ALPHA / 2) for n in range(reports + 1)])


def decided_ever(rng: np.random.Generator, p: float, share: float, reports: int) -> bool:
    """An A/A rollout (the same release on both arms) checked after every report: did it ever decide? Vectorised:
    the test decides iff some arm's confidence sequence ever misses the common mean's side."""
    on_candidate = rng.random(reports) < share
    scores = rng.random(reports) < p
    n_c = np.cumsum(on_candidate)
    n_i = np.arange(1, reports + 1) - n_c
    s_c = np.cumsum(scores & on_candidate)
    s_i = np.cumsum(scores & ~on_candidate)
    radii = _radii(reports)
    r_c, r_i = radii[n_c], radii[n_i]
    with np.errstate(divide="ignore", invalid="ignore"):
        m_c = np.where(n_c > 0, s_c / np.maximum(n_c, 1), 0.5)
        m_i = np.where(n_i > 0, s_i / np.maximum(n_i, 1), 0.5)
    low = np.maximum(0, m_c - r_c) - np.minimum(1, m_i + r_i)
    high = np.minimum(1, m_c + r_c) - np.maximum(0, m_i - r_i)
    return bool(np.any(low > 0) or np.any(high < 0))


def test_an_a_a_rollout_decides_either_way_no_more_often_than_alpha_allows() -> None:
    rng = np.random.default_rng(20261206)
    runs, reports = 1000, 2000
    decided = sum(decided_ever(rng, 0.6, 0.3, reports) for _ in range(runs))
    # At most alpha of the runs, within a binomial tolerance of three standard deviations.
    assert decided <= runs * ALPHA + 3 * math.sqrt(runs * ALPHA * (1 - ALPHA))


def test_the_vectorised_a_a_check_agrees_with_the_test_itself() -> None:
    for seed in range(20):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        assert decided_ever(a, 0.5, 0.5, 300) == (simulate(b, 0.5, 0.5, 0.5, 300)[0] is not None)


@pytest.mark.parametrize(("p_candidate", "p_incumbent", "expected"), [(0.2, 0.8, "rollback"), (0.9, 0.4, "promote")])
def test_a_clearly_different_candidate_is_decided_within_the_reports_its_power_calls_for(
    p_candidate: float, p_incumbent: float, expected: str
) -> None:
    share = 0.3
    budget = reports_for_power(abs(p_candidate - p_incumbent), share, ALPHA)
    rng = np.random.default_rng(7)
    outcomes = [simulate(rng, p_candidate, p_incumbent, share, budget) for _ in range(50)]
    assert all(decision == expected for decision, _ in outcomes)
    assert all(taken <= budget for _, taken in outcomes)


def test_the_interval_of_the_difference_narrows_as_reports_come_in() -> None:
    wide = difference_interval(Tally(10, 5.0), Tally(10, 5.0), ALPHA)
    narrow = difference_interval(Tally(1000, 500.0), Tally(1000, 500.0), ALPHA)
    assert wide[0] < narrow[0] < 0 < narrow[1] < wide[1]
    assert difference_interval(Tally(), Tally(), ALPHA) == (-1.0, 1.0)


def test_scores_are_clipped_to_the_configured_range_and_rescaled() -> None:
    assert unit_score(0.5, 0.0, 1.0) == 0.5
    assert unit_score(7.0, -1.0, 1.0) == 1.0
    assert unit_score(-1.0, -1.0, 1.0) == 0.0
    assert unit_score(0.0, -1.0, 1.0) == 0.5
