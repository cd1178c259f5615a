"""A harness's worked examples reach the model as earlier user/assistant turns, in every dialect and both engines'
prompt paths, after the system prompt and before the client's own conversation."""

from __future__ import annotations

from reef.core.scenarios import Dialect
from reef.inference.local.prompt import chat_messages
from reef.inference.translate import with_system_prompt

TURNS = (("2 + 2 =", "4"),)
EXAMPLE = [{"role": "user", "content": "2 + 2 ="}, {"role": "assistant", "content": "4"}]


def test_the_local_engine_puts_example_turns_after_the_system_prompt():
    body = {"messages": [{"role": "user", "content": "3 + 3 ="}]}
    messages = chat_messages(body, "Be brief.", example_turns=TURNS)
    assert messages == [{"role": "system", "content": "Be brief."}, *EXAMPLE, {"role": "user", "content": "3 + 3 ="}]


def test_the_upstream_request_carries_example_turns_in_each_dialect():
    chat = with_system_prompt(Dialect.CHAT, {"messages": [{"role": "user", "content": "q"}]}, "Be brief.", TURNS)
    assert chat["messages"] == [{"role": "system", "content": "Be brief."}, *EXAMPLE, {"role": "user", "content": "q"}]
    messages = with_system_prompt(Dialect.MESSAGES, {"messages": [{"role": "user", "content": "q"}]}, None, TURNS)
    assert messages["messages"] == [*EXAMPLE, {"role": "user", "content": "q"}] and "system" not in messages
    responses = with_system_prompt(Dialect.RESPONSES, {"input": "q"}, "Be brief.", TURNS)
    assert responses["input"] == [*EXAMPLE, {"role": "user", "content": "q"}]
    assert responses["instructions"] == "Be brief."
    untouched = {"messages": [{"role": "user", "content": "q"}]}
    assert with_system_prompt(Dialect.CHAT, untouched, None) is untouched
