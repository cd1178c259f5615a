"""Prompt rendering, sampling fields and incremental detokenization (tokenizer only, no forward passes)."""

from __future__ import annotations

import math

import pytest
import torch

from reef.core.errors import BadRequest
from reef.inference.local import render_prompt_ids
from reef.inference.local.detokenize import TextTracker
from reef.inference.local.prompt import chat_messages, render_prompt_text
from reef.inference.local.sampling import SamplingParams, pick_tokens, sampling_params


@pytest.mark.model
def test_the_prompt_is_the_models_own_chat_template_ending_with_the_assistant_turn(tokenizer):
    ids = render_prompt_ids(tokenizer, [{"role": "user", "content": [{"type": "text", "text": "Hi there"}]}])
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system") and "<|im_start|>user\nHi there<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def _word_tokenizer(chat_template: str | None = None):
    """A whitespace tokenizer with `<bos>`/`<eos>` and, optionally, a chat template: a model's files in miniature."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<bos>", "<eos>", "hi", "rules"]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = chat_template
    return fast


def test_a_model_without_a_chat_template_is_prompted_with_a_role_transcript_between_its_own_bos_and_eos():
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}]
    messages += [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "hi"}]
    text = render_prompt_text(_word_tokenizer(), messages)
    assert text == "<bos>System:\nrules\n\nUser:\nhi\n\nAssistant:\nhi<eos>\n\nUser:\nhi\n\nAssistant:\n"


def test_a_template_without_a_system_role_gets_the_system_text_at_the_start_of_the_first_user_turn():
    no_system = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
        "[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
    )
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}]
    assert render_prompt_text(_word_tokenizer(no_system), messages) == "[user] rules\n\nhi "
    with pytest.raises(BadRequest, match="rejected the conversation"):
        render_prompt_text(_word_tokenizer(no_system), [{"role": "system", "content": "rules"}])


def test_a_harness_system_prompt_merges_into_the_clients_system_message_or_comes_first():
    merged = chat_messages(
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}]}, "Rules."
    )
    assert merged[0] == {"role": "system", "content": "Rules.\n\nBe brief."} and len(merged) == 2
    added = chat_messages({"messages": [{"role": "user", "content": "x"}]}, "Rules.")
    assert added[0] == {"role": "system", "content": "Rules."} and added[1]["role"] == "user"


@pytest.mark.model
def test_assistant_tool_calls_and_tool_results_render_without_a_template_error(tokenizer):
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    text = tokenizer.decode(render_prompt_ids(tokenizer, messages, tools=[{"type": "function"}]))
    assert '"name": "weather"' in text and "sunny" in text


def test_sampling_fields_are_read_with_vllm_extras_and_bad_ones_name_the_field():
    params = sampling_params(
        {
            "max_completion_tokens": 5,
            "temperature": 0,
            "stop": "END",
            "seed": 3,
            "min_tokens": 2,
            "ignore_eos": True,
            "logprobs": True,
            "top_logprobs": 2,
        },
        default_max_new_tokens=64,
    )
    assert params == SamplingParams(5, 0.0, 1.0, ("END",), (), 3, 2, True, True, 2)
    assert sampling_params({}, 64).max_new_tokens == 64
    for field, value in [("top_p", 0), ("max_tokens", 0), ("stop", 3), ("top_logprobs", 50), ("n", 2)]:
        with pytest.raises(BadRequest) as refused:
            sampling_params({field: value}, 64)
        assert refused.value.field == field


def test_picked_tokens_carry_temperature_one_logprobs_and_respect_banned_ids():
    logits = torch.tensor([[0.0, 2.0, 1.0], [0.0, 2.0, 1.0]])
    greedy = SamplingParams(4, temperature=0.0, top_logprobs=2)
    choices = pick_tokens(logits, [greedy, greedy], [None, None], [(), (1,)])
    assert [c.token_id for c in choices] == [1, 2]
    expected = torch.log_softmax(logits[0], dim=-1)
    assert choices[1].logprob == pytest.approx(float(expected[2]))
    assert [t for t, _ in choices[0].top] == [1, 2]
    sampled = SamplingParams(4, temperature=1.0, top_p=0.5)
    assert pick_tokens(logits[:1], [sampled], [torch.Generator().manual_seed(0)], [()])[0].token_id == 1


def test_unseeded_rows_draw_together_from_their_own_temperatures_and_never_pick_a_banned_id():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 0.5], [0.0, 1.0, 0.5], [3.0, 0.0, 0.0]]).repeat(200, 1)
    hot, cold = SamplingParams(4, temperature=2.0), SamplingParams(4, temperature=0.05)
    params = [hot, cold, hot] * 200
    choices = pick_tokens(logits, params, [None] * 600, [(), (), (0,)] * 200)
    picked = torch.tensor([c.token_id for c in choices]).view(200, 3)
    assert (picked[:, 1] == 1).all()  # near-greedy at temperature 0.05
    assert (picked[:, 2] != 0).all()  # the banned id, although it has the largest logit
    counts = torch.bincount(picked[:, 0], minlength=3).float() / 200
    expected = torch.softmax(logits[0] / 2.0, dim=-1)
    assert (counts - expected).abs().max() < 0.12  # drawn at temperature 2 (±4 standard errors)
    assert all(c.logprob == pytest.approx(float(torch.log_softmax(logits[0], -1)[c.token_id])) for c in choices[:2])


def test_a_seeded_row_draws_from_its_distribution_and_never_a_token_of_probability_zero():
    # The last token is masked out (probability 0): a draw at the very top of the cumulative mass must not land on it.
    logits = torch.tensor([[1.0, 0.0, 2.0, -math.inf]])
    params = SamplingParams(4, temperature=1.0)
    generator = torch.Generator().manual_seed(3)
    picked = torch.tensor([pick_tokens(logits, [params], [generator], [()])[0].token_id for _ in range(600)])
    counts = torch.bincount(picked, minlength=4).float() / 600
    assert counts[3] == 0
    assert (counts[:3] - torch.softmax(logits[0, :3], dim=-1)).abs().max() < 0.08  # ±4 standard errors
    again = torch.Generator().manual_seed(3)
    assert [pick_tokens(logits, [params], [again], [()])[0].token_id for _ in range(20)] == picked[:20].tolist()
    top = torch.tensor([[0.0, -math.inf]])
    assert all(pick_tokens(top, [params], [None], [()])[0].token_id == 0 for _ in range(50))


@pytest.mark.model
def test_text_that_may_begin_a_stop_string_is_held_back_and_the_stop_string_is_cut(tokenizer):
    tracker = TextTracker(tokenizer, ("STOP",))
    pieces = [tracker.push(t) for t in tokenizer("Hello world ST", add_special_tokens=False)["input_ids"]]
    assert "".join(pieces) == "Hello world " and not tracker.stopped
    for token in tokenizer("OP and more", add_special_tokens=False)["input_ids"]:
        tracker.push(token)
        if tracker.stopped:
            break
    assert tracker.stopped and tracker.text == "Hello world " and tracker.flush() == ""
