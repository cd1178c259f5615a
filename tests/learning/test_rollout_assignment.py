"""Sticky assignment of requests to a rollout's arms."""

from __future__ import annotations

import math

from reef.learning.rollout.assignment import arm_of, assignment_key


def test_the_same_key_always_gets_the_same_arm() -> None:
    for n in range(200):
        first = arm_of(f"session:{n}", "rollout_a", 0.3)
        assert all(arm_of(f"session:{n}", "rollout_a", 0.3) == first for _ in range(5))


def test_shares_over_many_keys_are_within_sampling_error() -> None:
    keys, share = 20000, 0.1
    on_candidate = sum(arm_of(f"user:{n}", "rollout_b", share) == "candidate" for n in range(keys))
    assert abs(on_candidate - keys * share) <= 4 * math.sqrt(keys * share * (1 - share))


def test_a_new_rollout_reshuffles_who_is_exposed() -> None:
    first = {n for n in range(2000) if arm_of(f"user:{n}", "rollout_1", 0.2) == "candidate"}
    second = {n for n in range(2000) if arm_of(f"user:{n}", "rollout_2", 0.2) == "candidate"}
    assert first and second and first != second


def test_the_session_tag_wins_over_the_user_tag_and_no_tag_means_per_request() -> None:
    assert assignment_key({"session": "s1", "user": "u1"}) == "session:s1"
    assert assignment_key({"user": "u1"}) == "user:u1"
    assert assignment_key({"other": "x"}) is None
    arms = {arm_of(None, "rollout_c", 0.5) for _ in range(200)}
    assert arms == {"candidate", "incumbent"}
