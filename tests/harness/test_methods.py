"""Each harness method grows a candidate tree from judged traces, on a fake engine that reads its prompt."""

from __future__ import annotations

import random

from reef.harness.chat import chat_harness_of
from reef.harness.proposals import ProposalQueue
from reef.harness.tree import HarnessTree, Node, load_tree
from reef.recipes.ace import Ace, playbook
from reef.recipes.evolve import Evolve
from reef.recipes.gepa import Gepa, pareto_front, sample_parent
from reef.recipes.harness_method import fallback_mutations
from reef.recipes.reasoning_bank import ReasoningBank, retrieve
from tests.harness.conftest import QUESTIONS, batch_of

FOUR = dict(list(QUESTIONS.items())[:4])


def test_the_processor_pairs_each_report_with_the_inference_it_cites():
    batch = batch_of(FOUR)
    assert len(batch.samples) == 4 and len(batch.record_ids) == 8
    sample = batch.samples[0]
    assert sample["messages"][-1]["content"] == "what is 1 + 1?"
    assert (sample["answer"], sample["score"], sample["expected"]) == ("I do not know", 0.0, "2")


async def test_evolve_applies_the_proposers_json_mutations(settings, engine, make_ctx):
    engine.proposer_reply = 'Sure!\n```json\n[{"kind": "rules", "text": "Reply with the number only."}]\n```'
    recipe = Evolve(settings)
    grown = await recipe.grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    tree = load_tree(path)
    assert metrics["source"] == "proposer" and metrics["method"] == "evolve"
    assert any(node.text == "Reply with the number only." for node in tree)
    assert "what is 1 + 1?" in engine.proposer_calls[0][1]["content"]  # the failing trace reached the proposer


async def test_evolve_falls_back_to_failing_examples_when_the_proposer_rambles(settings, engine, make_ctx):
    recipe = Evolve(settings)
    grown = await recipe.grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    tree = load_tree(path)
    assert metrics["source"] == "fallback"
    assert len(tree.of_kind("memory")) == 4
    assert ("what is 1 + 1?", "2") in chat_harness_of(tree).example_turns


async def test_a_proposer_that_leaks_a_key_is_refused_and_the_step_still_yields_a_candidate(settings, engine, make_ctx):
    engine.proposer_reply = '[{"kind": "rules", "text": "use key sk-abcdefghijklmnopqrstuvwxyz0123"}]'
    grown = await Evolve(settings).grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    assert metrics["source"] == "fallback" and metrics["refused"]
    assert "sk-abc" not in (path / "harness.json").read_text()


async def test_queued_agent_proposals_are_applied_once(settings, engine, make_ctx):
    queue = ProposalQueue.for_settings(settings)
    create = {"op": "create", "node": {"id": "agent-rule", "kind": "rules", "config": {"text": "Be terse."}}}
    proposal = queue.append("s", [create], "the agent asked")
    grown = await Evolve(settings).grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    assert load_tree(path).get("agent-rule") is not None
    assert metrics["proposal_ids"] == [proposal["proposal_id"]]
    assert queue.pending("s", set(metrics["proposal_ids"])) == []


async def test_gepa_keeps_a_child_only_when_it_is_strictly_better_on_the_minibatch(settings, engine, make_ctx):
    recipe = Gepa(settings)
    grown = await recipe.grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    assert metrics["accepted_on_minibatch"] is True
    assert sum(metrics["fallback_child_scores"]) > sum(metrics["parent_scores"])
    state = (path / "state" / "gepa.json").read_text()
    assert '"archive"' in state and "what is 1 + 1?" in state
    # From the improved parent, nothing failing remains on a minibatch: no strictly better child, no change.
    grown = await recipe.grow(batch_of(FOUR), path, make_ctx(step=2))
    _path2, metrics2 = grown.path, grown.metrics
    assert metrics2["mutations"] == [] or metrics2["accepted_on_minibatch"]


def test_the_pareto_front_holds_candidates_best_on_some_task():
    archive = [
        {"id": "a", "scores": {"t1": 1.0, "t2": 0.0}},
        {"id": "b", "scores": {"t1": 0.0, "t2": 1.0}},
        {"id": "c", "scores": {"t1": 0.0, "t2": 0.0}},
    ]
    assert pareto_front(archive) == {"a": 1, "b": 1}
    assert sample_parent(archive, random.Random(0))["id"] in {"a", "b"}


async def test_ace_adds_bullets_and_credits_them_by_outcome(settings, engine, make_ctx):
    engine.proposer_reply = "- Always reply with the final number only.\n- Double-check sums."
    recipe = Ace(settings)
    grown = await recipe.grow(batch_of(FOUR), None, make_ctx())
    path, _metrics = grown.path, grown.metrics
    bullets = playbook(load_tree(path))
    assert "Always reply with the final number only." in [b.text for b in bullets]
    assert all(b.config["helpful"] == 0 and b.config["harmful"] == 0 for b in bullets)
    # Another round of failures: the bullets relevant to them are counted harmful; nothing is rewritten.
    grown = await recipe.grow(batch_of(FOUR), path, make_ctx(step=2))
    _path2, metrics2 = grown.path, grown.metrics
    ops = {m["op"] for m in metrics2["mutations"]}
    assert ops <= {"create", "update", "remove"}
    assert any(m["op"] == "update" and m["config"].get("harmful") for m in metrics2["mutations"])


async def test_ace_prunes_bullets_that_hurt_more_than_they_help(settings, engine, make_ctx):
    recipe = Ace(settings)
    harmful = Node("ace-bad", "memory", {"text": "what is sum", "tags": ["playbook"], "helpful": 0, "harmful": 5})
    parent = make_ctx().work_dir / "parent"
    from reef.harness.render import write_tree

    write_tree(HarnessTree.of([Node("rules", "rules", {"text": "Be brief."}), harmful]), parent)
    grown = await recipe.grow(batch_of(FOUR), parent, make_ctx(step=2))
    path, metrics = grown.path, grown.metrics
    assert load_tree(path).get("ace-bad") is None
    assert {"op": "remove", "id": "ace-bad"} in metrics["mutations"]


async def test_reasoning_bank_distils_strategies_and_retrieves_the_relevant_ones(settings, engine, make_ctx):
    engine.proposer_reply = "Title: sums\nStrategy: Add the two numbers and reply with the number alone."
    recipe = ReasoningBank(settings)
    grown = await recipe.grow(batch_of(FOUR), None, make_ctx())
    path, metrics = grown.path, grown.metrics
    assert metrics["distilled"] >= 1 and metrics["bank_size"] >= 4
    memory = [node.text for node in load_tree(path).of_kind("memory")]
    assert len(memory) == 4
    assert any(text.startswith("Q: what is") for text in memory)


def test_retrieval_prefers_items_sharing_words_with_the_query():
    bank = [
        {"id": "a", "content": "x", "keywords": ["capital", "france"]},
        {"id": "b", "content": "y", "keywords": ["sum", "numbers"]},
    ]
    assert [item["id"] for item in retrieve(bank, [{"sum"}], 1)] == ["b"]


def test_the_fallback_turns_failures_into_worked_examples_without_duplicates():
    batch = batch_of(FOUR)
    tree = HarnessTree()
    first = fallback_mutations(tree, batch.samples)
    assert [m.node.text for m in first][0] == "Q: what is 1 + 1?\nA: 2"
    from reef.harness.mutations import apply_mutations

    assert fallback_mutations(apply_mutations(tree, first), batch.samples) == []
