"""Sessions rebuilt from traffic: by the session tag, or by a request resending an earlier turn's conversation."""

from __future__ import annotations

from reef.judge.sessions import Sessions, Turn


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def turn(record_id: str, messages: list[dict], answer: str, at: float, tag: str | None = None) -> Turn:
    return Turn(record_id, tuple(messages), assistant(answer), at, tag)


def test_without_a_tag_a_request_resending_a_turn_and_its_answer_carries_that_turns_next_state() -> None:
    sessions = Sessions(ttl_s=900)
    assert sessions.add(turn("t1", [user("capital of France?")], "Paris.", 1.0)) is None

    found = sessions.add(turn("t2", [user("capital of France?"), assistant("Paris."), user("too short!")], "…", 2.0))

    assert found is not None
    assert found.turn.record_id == "t1" and found.message == user("too short!") and found.record_id == "t2"
    assert found.session == "t1"  # a session without a tag is named by its first turn


def test_two_interleaved_sessions_without_tags_are_told_apart_by_their_histories() -> None:
    sessions = Sessions(ttl_s=900)
    sessions.add(turn("a1", [user("hi, I am A")], "Hello A.", 1.0))
    sessions.add(turn("b1", [user("hi, I am B")], "Hello B.", 2.0))
    b2 = sessions.add(turn("b2", [user("hi, I am B"), assistant("Hello B."), user("B again")], "Yes B.", 3.0))
    a2 = sessions.add(turn("a2", [user("hi, I am A"), assistant("Hello A."), user("A again")], "Yes A.", 4.0))
    a3 = sessions.add(
        turn("a3", [user("hi, I am A"), assistant("Hello A."), user("A again"), assistant("Yes A."), user("A3")], "", 5)
    )

    assert b2 is not None and (b2.turn.record_id, b2.message["content"], b2.session) == ("b1", "B again", "b1")
    assert a2 is not None and (a2.turn.record_id, a2.message["content"], a2.session) == ("a1", "A again", "a1")
    assert a3 is not None and (a3.turn.record_id, a3.message["content"], a3.session) == ("a2", "A3", "a1")


def test_two_interleaved_tagged_sessions_follow_their_tags_even_when_clients_send_only_the_new_message() -> None:
    sessions = Sessions(ttl_s=900)
    sessions.add(turn("x1", [user("same question")], "answer x", 1.0, tag="x"))
    sessions.add(turn("y1", [user("same question")], "answer y", 2.0, tag="y"))
    y2 = sessions.add(turn("y2", [user("no, shorter")], "ok", 3.0, tag="y"))
    x2 = sessions.add(turn("x2", [user("same question"), assistant("answer x"), user("thanks")], "…", 4.0, tag="x"))

    assert y2 is not None and (y2.turn.record_id, y2.message["content"], y2.session) == ("y1", "no, shorter", "y")
    assert x2 is not None and (x2.turn.record_id, x2.message["content"], x2.session) == ("x1", "thanks", "x")


def test_a_tool_result_is_a_next_state() -> None:
    sessions = Sessions(ttl_s=900)
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "ls"}}]}
    sessions.add(Turn("t1", (user("list files"),), call, 1.0))
    result = {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}

    found = sessions.add(turn("t2", [user("list files"), call, result], "There is a.txt.", 2.0))

    assert found is not None and found.turn.record_id == "t1" and found.message == result


def test_a_session_idle_past_its_ttl_expires_and_its_last_turn_gets_no_next_state() -> None:
    sessions = Sessions(ttl_s=10)
    sessions.add(turn("t1", [user("q")], "a", 1.0, tag="s"))
    assert sessions.waiting() == 1

    late = sessions.add(turn("t2", [user("q"), assistant("a"), user("late reply")], "b", 100.0, tag="s"))

    assert late is None  # a new session starts
    assert [t.record_id for t in sessions.expired()] == ["t1"]
    assert sessions.expired() == []  # reported once


def test_a_retried_request_does_not_give_a_turn_a_second_next_state() -> None:
    sessions = Sessions(ttl_s=900)
    sessions.add(turn("t1", [user("q")], "a", 1.0))
    history = [user("q"), assistant("a"), user("next")]
    assert sessions.add(turn("t2", history, "b", 2.0)) is not None
    assert sessions.add(turn("t2-retry", history, "b", 3.0)) is None
