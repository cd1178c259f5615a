"""The stream's figures, computed by hand on small matrices (row: lesson taught; column: lesson measured)."""

from __future__ import annotations

import pytest

from reef.demo.stream_metrics import (
    final_average,
    final_over_peak,
    forgetting,
    learning_curve,
    mean_of,
    peaks,
    stream_figures,
    transfer,
)

THREE = [[0.8], [0.6, 0.9], [0.7, 0.5, 1.0]]


def test_the_learning_curve_is_the_mean_of_the_lessons_taught_so_far() -> None:
    assert learning_curve(THREE) == [0.8, 0.75, pytest.approx(0.7333, abs=1e-4)]


def test_forgetting_is_the_best_earlier_score_minus_the_last_and_the_last_lesson_has_none() -> None:
    # lesson 1: best of 0.8 and 0.6, minus 0.7; lesson 2: 0.9 minus 0.5
    assert forgetting(THREE) == [pytest.approx(0.1), pytest.approx(0.4), None]
    assert mean_of(forgetting(THREE)) == pytest.approx(0.25)


def test_forgetting_counts_from_the_peak_while_transfer_counts_from_right_after_the_lesson() -> None:
    rising_then_falling = [[0.5], [0.9, 0.8], [0.6, 0.8, 0.7]]
    assert forgetting(rising_then_falling) == [pytest.approx(0.3), pytest.approx(0.0), None]
    assert transfer(rising_then_falling) == [pytest.approx(0.1), pytest.approx(0.0), None]


def test_a_lesson_that_later_lessons_improve_has_negative_forgetting_and_positive_transfer() -> None:
    helped = [[0.5], [0.9, 0.8]]
    assert forgetting(helped) == [pytest.approx(-0.4), None]
    assert transfer(helped) == [pytest.approx(0.4), None]


def test_the_final_average_over_the_mean_peak_says_how_much_of_what_was_known_is_kept() -> None:
    assert peaks(THREE) == [0.8, 0.9, 1.0]
    assert final_average(THREE) == pytest.approx(0.7333, abs=1e-4)
    assert final_over_peak(THREE) == pytest.approx(0.7333 / 0.9, abs=1e-3)


def test_a_stream_that_learnt_nothing_or_taught_nothing_has_no_ratio() -> None:
    assert final_over_peak([[0.0], [0.0, 0.0]]) is None
    figures = stream_figures([])
    assert figures["final_average"] is None and figures["mean_forgetting"] is None
    assert figures["learning_curve"] == [] and figures["final_over_peak"] is None


def test_the_figures_of_one_stream_are_all_in_one_document() -> None:
    figures = stream_figures(THREE)
    assert figures["matrix"] == THREE
    assert figures["mean_transfer"] == pytest.approx(-0.25)
    assert figures["mean_peak"] == pytest.approx(0.9)
