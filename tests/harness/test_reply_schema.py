"""A proposer's reply decoded under its method's schema always parses; a method with its proposer off is its
deterministic fallback alone (the control arm of the harness demos)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from reef.core.settings import LearningSettings, Settings, StorageSettings
from reef.harness.mutations import coerce_mutations
from reef.harness.proposer import parse_json_reply
from reef.harness.reply_schema import (
    COMPOSITION_REPLY,
    COMPOSITION_SCHEMA,
    MAX_NODE_CHARS,
    MAX_NODES,
    NODE_KINDS,
    NODES_REPLY,
    NODES_SCHEMA,
    STRATEGY_REPLY,
    STRATEGY_SCHEMA,
    TIPS_REPLY,
    TIPS_SCHEMA,
    reply_max_tokens,
)
from reef.recipes.ace import parse_tips
from reef.recipes.evolve import Evolve
from reef.recipes.reasoning_bank import parse_item
from tests.harness.conftest import QUESTIONS, batch_of

FOUR = dict(list(QUESTIONS.items())[:4])
NODE = st.fixed_dictionaries(
    {"kind": st.sampled_from(NODE_KINDS), "text": st.text(min_size=1, max_size=MAX_NODE_CHARS)}
)


@given(st.lists(NODE, min_size=1, max_size=MAX_NODES))
@hypothesis_settings(max_examples=200, deadline=None)
def test_every_reply_of_the_nodes_schema_parses_into_one_mutation_per_node(nodes):
    reply = json.dumps(nodes, separators=(",", ":"))
    mutations = coerce_mutations(parse_json_reply(reply), id_prefix="evolve")
    assert [m.node.config["text"] for m in mutations if m.node is not None] == [n["text"] for n in nodes]


def test_a_reply_that_is_one_json_value_is_taken_whole_even_when_its_strings_hold_code_fences():
    nodes = [{"kind": "rules", "text": "```"}, {"kind": "rules", "text": "0"}, {"kind": "rules", "text": "```"}]
    assert parse_json_reply(json.dumps(nodes)) == nodes


@given(st.text(max_size=400))
@hypothesis_settings(max_examples=300, deadline=None)
def test_an_unconstrained_reply_never_breaks_the_parser_it_gives_mutations_or_none(reply):
    assert isinstance(coerce_mutations(parse_json_reply(reply), id_prefix="evolve"), list)


def test_the_schemas_compile_to_grammars_the_embedded_engine_enforces():
    from reef.inference.local.structured import grammar_of

    for reply in (NODES_REPLY, COMPOSITION_REPLY, TIPS_REPLY, STRATEGY_REPLY):
        assert grammar_of({"messages": [], "response_format": reply}) is not None


async def test_evolve_asks_its_proposer_for_a_reply_of_the_nodes_schema(settings, engine, make_ctx):
    engine.proposer_reply = '[{"kind":"rules","text":"Reply with the number only."}]'
    metrics = (await Evolve(settings).grow(batch_of(FOUR), None, make_ctx())).metrics
    proposer_body = next(body for body, _ in engine.calls if body.get("response_format") is not None)
    assert proposer_body["response_format"] == NODES_REPLY
    assert proposer_body["max_tokens"] >= reply_max_tokens(NODES_SCHEMA, 0)
    assert metrics["source"] == "proposer"


async def test_with_its_proposer_off_a_method_publishes_only_its_fallback(tmp_path, engine, make_ctx):
    off = Settings(
        storage=StorageSettings(dir=tmp_path / "state"),
        learning=LearningSettings(recipe="evolve", batch_size=4, recipe_config={"proposer": "off"}),
    )
    engine.proposer_reply = '[{"kind":"rules","text":"Reply with the number only."}]'
    metrics = (await Evolve(off).grow(batch_of(FOUR), None, make_ctx())).metrics
    assert metrics["source"] == "fallback" and metrics["proposer_off"] is True
    assert engine.proposer_calls == []


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from reef.inference.local import resolve_model_path

    cache = Path(os.environ.get("REEF_TEST_MODEL_CACHE", "~/.cache/reef/models")).expanduser()
    return AutoTokenizer.from_pretrained(resolve_model_path("smollm2", cache))


def constrained_random_reply(tokenizer, response_format, seed: int, max_tokens: int) -> str:
    """A reply of random tokens, each drawn from what the grammar allows next: an adversarial model."""
    from reef.inference.local.structured import Constraint, grammar_of

    grammar = grammar_of({"messages": [], "response_format": response_format})
    assert grammar is not None
    constraint = Constraint(tokenizer, grammar)
    generator = torch.Generator().manual_seed(seed)
    eos = (tokenizer.eos_token_id,)
    taken: list[int] = []
    for _ in range(max_tokens):
        if constraint.complete:
            break
        allowed = constraint.allowed(len(tokenizer), eos)
        token = int(torch.multinomial(allowed.float(), 1, generator=generator))
        constraint.take(token)
        taken.append(token)
    assert constraint.complete, "the reply did not close within the token bound"
    return tokenizer.decode(taken)


@pytest.mark.model
@pytest.mark.parametrize("seed", range(4))
def test_a_reply_decoded_under_the_schema_always_parses_even_from_random_tokens(tokenizer, seed):
    nodes_reply = constrained_random_reply(tokenizer, NODES_REPLY, seed, reply_max_tokens(NODES_SCHEMA, 0))
    parsed = json.loads(nodes_reply)
    assert 1 <= len(parsed) <= MAX_NODES
    assert len(coerce_mutations(parsed, id_prefix="evolve")) == len(parsed)
    composition = constrained_random_reply(tokenizer, COMPOSITION_REPLY, seed, reply_max_tokens(COMPOSITION_SCHEMA, 0))
    chosen = json.loads(composition)
    assert set(chosen) == {"parent", "nodes"} and chosen["nodes"]
    tips = constrained_random_reply(tokenizer, TIPS_REPLY, seed, reply_max_tokens(TIPS_SCHEMA, 0))
    assert 1 <= len(json.loads(tips)) <= 3 and isinstance(parse_tips(tips, 3), list)
    strategy = constrained_random_reply(tokenizer, STRATEGY_REPLY, seed, reply_max_tokens(STRATEGY_SCHEMA, 0))
    assert set(json.loads(strategy)) == {"title", "strategy"}


@given(st.lists(st.text(min_size=8, max_size=200).filter(lambda t: len(t.strip()) >= 8), min_size=1, max_size=3))
@hypothesis_settings(max_examples=100, deadline=None)
def test_every_reply_of_the_tips_schema_parses_into_its_tips(tips):
    assert parse_tips(json.dumps(tips), 3) == [t.strip() for t in tips]


def test_a_strategy_reply_of_the_schema_becomes_a_bank_item():
    trace = {"messages": [{"role": "user", "content": "what is 2 + 2?"}], "score": 0.0}
    item = parse_item('{"title":"sums","strategy":"Add the numbers and reply with the sum only."}', trace)
    assert item is not None and item["title"] == "sums" and item["content"].startswith("Add the numbers")
