"""Turning a chat request into prompt token ids with the model's own chat template.

`render_prompt_ids` is shared with training: the SFT trainer must tokenize prompts exactly as the engine does,
or the adapter learns a prompt format it never sees at serving time. `reply_ids` is shared the same way.

A model whose files carry no chat template (a base model's GGUF often has none) is prompted with
`PLAIN_TEMPLATE`, a role-labelled transcript built from the tokenizer's own BOS and EOS tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reef.core.errors import BadRequest
from reef.inference.translate.content import text_of

# For a model without a chat template: each turn as `Role:` and its text; an assistant turn ends with the
# tokenizer's EOS, which `reply_ids` appends to a reply, so training and serving agree on where a reply ends.
PLAIN_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] | capitalize + ':\\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:\\n' }}{% endif %}"
)


def render_prompt_ids(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    field: str = "messages",
) -> list[int]:
    """Token ids of `messages` rendered by the tokenizer's chat template, ending with the assistant turn's opening.

    Messages are chat-shaped (`role`, `content` as text or parts); `tools` are OpenAI tool definitions, passed to
    the template (templates that do not mention tools simply ignore them). A conversation the template rejects
    is a BadRequest naming `field`.
    """
    text = render_prompt_text(tokenizer, messages, tools, field=field)
    # The template already wrote any BOS/role markers, so the tokenizer must not add special tokens again.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def reply_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` as a whole reply: its tokens, then end of sequence (how training tokenizes a
    demonstration and the gate a known answer)."""
    return [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]


def render_prompt_text(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    field: str = "messages",
) -> str:
    """The prompt as text (see `render_prompt_ids`).

    Where the template rejects a leading system message (templates without a system role), its text is folded
    into the first user turn, as templates that have no system role but accept one do themselves."""
    template = str(getattr(tokenizer, "chat_template", "") or "") or PLAIN_TEMPLATE
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True, "chat_template": template}
    if tools:
        kwargs["tools"] = tools
    rendered = _template_messages(messages, "tool_calls" in template)
    try:
        return str(tokenizer.apply_chat_template(rendered, **kwargs))
    except Exception as exc:  # a template error is the request's fault (e.g. roles it does not accept)
        folded = fold_system(rendered)
        if folded is not rendered:
            try:
                return str(tokenizer.apply_chat_template(folded, **kwargs))
            except Exception:
                pass
        raise BadRequest(f"the model's chat template rejected the conversation: {exc}", field)


def fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with a leading system message's text put before the first user turn's (`messages` itself where
    there is no leading system message followed by a user turn)."""
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return messages
    system, user = messages[0]["content"], messages[1]["content"]
    return [{**messages[1], "content": f"{system}\n\n{user}" if system else user}, *messages[2:]]


def _template_messages(messages: list[dict[str, Any]], native_tool_calls: bool) -> list[dict[str, Any]]:
    # Templates concatenate `content` as a string; flatten parts, and give tool calls a textual form when the
    # template does not render them itself, so that the whole conversation reaches the model.
    rendered = []
    for message in messages:
        out = {key: value for key, value in message.items() if value is not None}
        content = text_of(message.get("content"))
        calls = message.get("tool_calls") or []
        if calls and not native_tool_calls:
            described = [
                f'<tool_call>{{"name": "{(c.get("function") or {}).get("name", "")}", '
                f'"arguments": {(c.get("function") or {}).get("arguments") or "{}"}}}</tool_call>'
                for c in calls
            ]
            content = "\n".join([content, *described]) if content else "\n".join(described)
        out["content"] = content
        rendered.append(out)
    return rendered


def chat_messages(
    body: dict[str, Any],
    system_prompt: str | None,
    field: str = "messages",
    example_turns: Sequence[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    """The request's messages with `system_prompt` (from a harness) merged into, or placed before, the first one,
    and `example_turns` as earlier user/assistant turns after the leading system message.

    `field` is where the client's conversation was (a translated request's may come out empty: a BadRequest).
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("holds no message the model can read", field)
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest("each message needs a string role", f"messages.{index}")
    messages = [dict(m) for m in messages]
    if messages[0]["role"] == "developer":
        messages[0]["role"] = "system"
    if system_prompt:
        if messages[0]["role"] == "system":
            existing = text_of(messages[0].get("content"))
            messages[0]["content"] = f"{system_prompt}\n\n{existing}" if existing else system_prompt
        else:
            messages.insert(0, {"role": "system", "content": system_prompt})
    if example_turns:
        at = 1 if messages[0]["role"] == "system" else 0
        messages[at:at] = [
            {"role": role, "content": text}
            for question, answer in example_turns
            for role, text in (("user", question), ("assistant", answer))
        ]
    return messages
