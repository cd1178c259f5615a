"""Reading the judge's votes and hints: plurality, ties, garbage, hint deduplication."""

from __future__ import annotations

import pytest

from reef.judge.votes import dedupe_hints, judge_prompt, parse_hint, parse_vote, plurality


@pytest.mark.parametrize(
    ("reply", "vote"),
    [
        ("The user complained. \\boxed{-1}\nHint: answer in one sentence.", -1),
        ("They moved on: \\boxed{1}", 1),
        ("\\boxed{ 0 }", 0),
        ("first \\boxed{1}, on reflection \\boxed{-1}", -1),  # the last box counts
        ("Score: +1", 1),
        ("-1", -1),
        (" 1. ", 1),
        (1, 1),
        (-1, -1),
    ],
)
def test_a_vote_is_read_from_the_box_a_label_or_a_bare_value(reply, vote) -> None:
    assert parse_vote(reply) == vote


@pytest.mark.parametrize(
    "garbage", ["", "I think it was good", "\\boxed{2}", "score: 7", "+1 or -1?", None, True, 3, 0.5, {"vote": 1}]
)
def test_an_unparseable_or_out_of_range_vote_counts_zero(garbage) -> None:
    assert parse_vote(garbage) == 0


def test_the_plurality_wins_and_a_tie_or_no_vote_is_zero() -> None:
    assert plurality([1, 1, -1]) == 1
    assert plurality([-1, 0, -1]) == -1
    assert plurality([1, -1, 0]) == 0  # a three-way tie
    assert plurality([1, -1]) == 0
    assert plurality([0, 0, 1]) == 0
    assert plurality([]) == 0


def test_a_hint_is_the_text_after_the_last_hint_line() -> None:
    assert parse_hint("\\boxed{-1}\nHint: keep it under ten words.") == "keep it under ten words."
    assert parse_hint("hint: one\nHINT: two") == "two"
    assert parse_hint("\\boxed{-1}") is None
    assert parse_hint("Hint:   ") is None


def test_hints_are_deduplicated_up_to_case_and_spacing_shortest_first_at_most_three() -> None:
    hints = [
        "Answer in one short sentence.",
        "answer in  one short sentence.",
        None,
        "Be brief.",
        "  ",
        "Do not open with 'Sure!'.",
        "Give only the answer, no preamble at all.",
    ]
    assert dedupe_hints(hints) == ["Be brief.", "Do not open with 'Sure!'.", "Answer in one short sentence."]
    assert dedupe_hints(hints, max_hints=1) == ["Be brief."]


def test_the_prompt_shows_the_conversation_the_answer_and_the_next_state() -> None:
    prompt = judge_prompt([{"role": "user", "content": "capital of France?"}], "Paris.", {"role": "user",
                          "content": "thanks!"})  # fmt: skip
    assert "[user] capital of France?" in prompt and "Paris." in prompt and "NEXT STATE [user]:\nthanks!" in prompt
