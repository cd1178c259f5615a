"""The openclawrl demo's simulated user and rule-based judge (both scripted stand-ins, labelled as such)."""

from __future__ import annotations

from reef.demo.user import COMPLAINT, FAREWELL, HINT, MAX_WORDS, accepts, gate_acceptance, judge, questions, reply
from reef.judge.base import JudgeRequest


def test_the_question_splits_are_disjoint_and_the_same_for_the_same_seed() -> None:
    bank = questions(seed=0)
    texts = {name: {q.text for q in split} for name, split in bank.items()}
    assert not texts["test"] & texts["training"] and not texts["test"] & texts["validation"]
    assert not texts["validation"] & texts["training"]
    assert len(bank["test"]) == 40 and questions(seed=0) == bank and questions(seed=1) != bank


def test_the_user_accepts_at_most_the_word_limit_and_complains_otherwise() -> None:
    short, long = "Paris.", " ".join(["word"] * (MAX_WORDS + 1))
    assert accepts(short) and not accepts(long) and not accepts("   ")
    assert reply(long, "Next?") == COMPLAINT
    assert reply(short, "What is 2 plus 3?") == "Thanks. What is 2 plus 3?" and reply(short, None) == FAREWELL
    assert gate_acceptance(short, None) == 1.0 and gate_acceptance(long, None) == 0.0


def test_the_rule_based_judge_reads_only_the_users_reply() -> None:
    def request(next_message: str) -> JudgeRequest:
        return JudgeRequest("t", (), "any answer", {"role": "user", "content": next_message}, "n", "s")

    assert judge(request(COMPLAINT)) == {"vote": -1, "hint": HINT}
    assert judge(request("Thanks. What is 2 plus 3?")) == {"vote": 1}
    assert judge(request("what?")) == {"vote": 0}
