"""Selection policies."""

from __future__ import annotations

import pytest

from reef.core.errors import BadRequest
from reef.core.settings import EvaluationSettings, Settings
from reef.learning.evaluation import (
    Always,
    MeanImprovement,
    ScoreComparison,
    SignificantMeanImprovement,
    load_selector,
)
from tests.fakes.evaluation import NeverSelector


def settings(policy: str, margin: float = 0.0) -> Settings:
    return Settings(evaluation=EvaluationSettings(policy=policy, margin=margin))


def test_score_comparison_needs_more_wins_than_losses_beyond_the_margin():
    assert ScoreComparison().accept([1, 1, 0], [0, 0, 1])[0]
    assert not ScoreComparison().accept([1, 0], [0, 1])[0]  # a tie is not an improvement
    assert not ScoreComparison(margin=1).accept([1, 1, 0], [0, 0, 1])[0]
    accepted, reason = ScoreComparison().accept([1, 1], [0, 1])
    assert accepted and reason == "wins 1 - losses 0 = 1 > margin 0"


def test_mean_must_be_strictly_better():
    assert MeanImprovement().accept([0.5, 1], [0.5, 0.5])[0]
    assert not MeanImprovement().accept([1, 0], [0.5, 0.5])[0]
    assert not MeanImprovement().accept([], [])[0]


def test_significant_mean_publishes_only_a_gain_beyond_the_gates_noise():
    significant = SignificantMeanImprovement()
    one_task_won = ([1.0] + [0.0] * 13, [0.0] * 14)
    assert MeanImprovement().accept(*one_task_won)[0]
    accepted, reason = significant.accept(*one_task_won)  # one task of 14 won: within one standard error, a tie
    assert not accepted and reason == "paired gain +0.0714 - margin 0 <= one standard error 0.0714 over 14 tasks"
    assert not significant.lost(*one_task_won)  # so it stays the lineage's tip
    assert significant.accept([1.0, 1.0] + [0.0] * 12, [0.0] * 14)[0]
    assert significant.accept([0.8, 0.6, 0.6] + [0.2] * 11, [0.2] * 14)[0]  # partial credit, spread over tasks
    assert not significant.accept([1.0, 1.0, 0.0] + [0.0] * 11, [0.0, 0.0, 1.0] + [0.0] * 11)[0]  # won 2, lost 1
    assert not SignificantMeanImprovement(margin=0.2).accept([1.0, 1.0] + [0.0] * 12, [0.0] * 14)[0]
    assert not significant.accept([], [])[0]
    with pytest.raises(ValueError):
        significant.accept([1.0], [1.0, 0.0])


def test_always_accepts_even_without_scores():
    assert Always().accept([], []) == (True, "policy always accepts")


def test_unpaired_scores_are_an_error():
    with pytest.raises(ValueError):
        ScoreComparison().accept([1], [1, 0])


def test_policies_are_loaded_by_name_or_dotted_class():
    assert isinstance(load_selector("always", settings("always")), Always)
    mean = load_selector("mean", settings("mean", margin=0.1))
    assert isinstance(mean, MeanImprovement) and mean.margin == 0.1
    assert isinstance(load_selector("score_comparison", settings("score_comparison")), ScoreComparison)
    significant = load_selector("significant_mean", settings("significant_mean", margin=0.05))
    assert isinstance(significant, SignificantMeanImprovement) and significant.margin == 0.05
    dotted = "tests.fakes.evaluation:NeverSelector"
    assert isinstance(load_selector(dotted, settings(dotted)), NeverSelector)
    assert isinstance(load_selector(dotted.replace(":", "."), settings(dotted)), NeverSelector)


def test_an_unknown_policy_is_refused_naming_the_setting():
    with pytest.raises(BadRequest) as refused:
        load_selector("nope.nothing:Here", settings("x"))
    assert refused.value.field == "evaluation.policy"
    with pytest.raises(BadRequest):
        load_selector("reef.core.settings:Settings", settings("x"))


def test_a_candidate_loses_only_when_it_is_worse_by_more_than_the_gates_noise():
    from reef.learning.base import significantly_worse

    assert not significantly_worse([1, 1, 0, 0], [1, 1, 0, 0])  # a tie
    assert not significantly_worse([0.5, 0.6, 0.4], [0.5, 0.7, 0.4])  # within one standard error
    assert significantly_worse([0, 0, 0, 0], [1, 1, 0, 0])
    assert not significantly_worse([0] + [1] * 13, [1] * 14)  # one task of 14 lost: within noise
    assert significantly_worse([0, 0, 0] + [1] * 11, [1] * 14)
    assert significantly_worse([0.2], [0.3]) and not significantly_worse([0.3], [0.3])
    assert significantly_worse([], []) and significantly_worse([1.0], [1.0, 0.0])
    assert ScoreComparison().lost([0, 0, 0, 0], [1, 1, 0, 0]) and not MeanImprovement().lost([1, 0], [0, 1])
