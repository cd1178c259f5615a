"""`response_format` in the local engine: validation, the grammar's token masks, and masked sampling (tokenizer
only, no forward passes)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from reef.core.errors import BadRequest
from reef.inference.local.sampling import SamplingParams, pick_tokens, sampling_params
from reef.inference.local.structured import Constraint, grammar_of

TRIPLES = {
    "type": "array",
    "minItems": 2,
    "maxItems": 2,
    "items": {
        "type": "array",
        "minItems": 3,
        "maxItems": 3,
        "items": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01},
    },
}


def json_schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "solution", "schema": schema}}


def body(response_format: object) -> dict:
    return {"messages": [{"role": "user", "content": "x"}], "response_format": response_format}


@pytest.mark.parametrize(
    ("response_format", "field"),
    [
        ("json", "response_format"),
        ({"type": "yaml"}, "response_format.type"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        ({"type": "json_schema", "json_schema": {"name": "s"}}, "response_format.json_schema.schema"),
        (json_schema({"type": "array", "minItems": "two"}), "response_format.json_schema.schema"),
    ],
)
def test_a_bad_response_format_is_refused_naming_the_field(response_format: object, field: str) -> None:
    with pytest.raises(BadRequest) as refused:
        sampling_params(body(response_format), 16)
    assert refused.value.field == field


def test_text_or_no_response_format_leaves_decoding_free_and_a_schema_becomes_a_grammar() -> None:
    assert sampling_params(body({"type": "text"}), 16).grammar is None
    assert sampling_params({"messages": []}, 16).grammar is None
    assert sampling_params(body(json_schema(TRIPLES)), 16).grammar is not None
    assert sampling_params(body({"type": "json_object"}), 16).grammar is not None


@pytest.mark.model
def test_the_mask_allows_only_tokens_that_keep_the_answer_valid_and_ends_it_when_complete(tokenizer) -> None:
    grammar = grammar_of(body(json_schema(TRIPLES)))
    assert grammar is not None
    constraint = Constraint(tokenizer, grammar)
    vocab = len(tokenizer)
    first = constraint.allowed(vocab, (tokenizer.eos_token_id,))
    assert first[tokenizer.encode("[[")[0]] and not first[tokenizer.encode("Here")[0]]
    for token in tokenizer.encode("[[0.5,0.25,0.1],[0.12,1,0]"):
        assert constraint.allowed(vocab, (tokenizer.eos_token_id,))[token]
        constraint.take(token)
    assert not constraint.complete
    after = constraint.allowed(vocab, (tokenizer.eos_token_id,))
    assert after[tokenizer.encode("]")[0]] and not after[tokenizer.encode(",")[0]]  # exactly two triples
    constraint.take(tokenizer.encode("]")[0])
    assert constraint.complete


@pytest.mark.model
def test_numbers_outside_the_schemas_bounds_or_precision_are_masked_out(tokenizer) -> None:
    grammar = grammar_of(body(json_schema(TRIPLES)))
    assert grammar is not None
    constraint = Constraint(tokenizer, grammar)
    for token in tokenizer.encode("[[0.12"):
        constraint.take(token)
    mask = constraint.allowed(len(tokenizer), (tokenizer.eos_token_id,))
    assert not any(mask[t] for t in tokenizer.encode("3"))  # a third decimal is not a multiple of 0.01
    fresh = Constraint(tokenizer, grammar)
    for token in tokenizer.encode("[["):
        fresh.take(token)
    assert not fresh.allowed(len(tokenizer), (tokenizer.eos_token_id,))[tokenizer.encode("-")[0]]


def test_masked_sampling_picks_an_allowed_token_and_records_the_models_own_log_prob() -> None:
    logits = torch.tensor([[4.0, 1.0, 0.5, 0.0]])
    allowed = torch.tensor([False, False, True, True])
    expected = torch.log_softmax(logits, dim=-1)[0]
    greedy = pick_tokens(logits, [SamplingParams(4, temperature=0.0)], [None], [()], [allowed])[0]
    assert greedy.token_id == 2 and math.isclose(greedy.logprob, float(expected[2]), rel_tol=1e-6)
    generator = torch.Generator().manual_seed(0)
    sampled = [
        pick_tokens(logits, [SamplingParams(4, temperature=1.0)], [generator], [()], [allowed])[0].token_id
        for _ in range(50)
    ]
    assert set(sampled) <= {2, 3} and len(set(sampled)) == 2


@pytest.mark.model
def test_a_failed_matcher_allows_only_the_end_of_the_sequence(tokenizer) -> None:
    grammar = grammar_of(body(json_schema(TRIPLES)))
    assert grammar is not None
    constraint = Constraint(tokenizer, grammar)
    constraint.take(tokenizer.encode("Hello")[0])  # not allowed: the matcher enters its error state
    mask = constraint.allowed(len(tokenizer), (tokenizer.eos_token_id,))
    assert mask.nonzero().flatten().tolist() == [tokenizer.eos_token_id]


@pytest.mark.model
def test_the_schema_is_a_plain_json_schema_that_a_seed_answer_satisfies(tokenizer) -> None:
    grammar = grammar_of(body(json_schema(TRIPLES)))
    assert grammar is not None
    constraint = Constraint(tokenizer, grammar)
    for token in tokenizer.encode(json.dumps([[0.25, 0.25, 0.25], [0.75, 0.75, 0.25]], separators=(",", ":"))):
        constraint.take(token)
    assert constraint.complete
