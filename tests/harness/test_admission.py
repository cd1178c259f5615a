"""Admission of harness nodes, the credential tripwire, and atomic mutations."""

from __future__ import annotations

import pytest

from reef.core.errors import BadRequest
from reef.harness.admission import admit_node, admit_tree, refuse_credentials
from reef.harness.mutations import Mutation, apply_mutations, coerce_mutations, diff_trees, parse_mutations
from reef.harness.tree import HarnessTree, Node, tree_from_json

RULES = Node("rules", "rules", {"text": "Reply with only the answer."})
SKILL = Node("add", "skill", {"name": "adding", "description": "Add numbers", "text": "Add digit by digit."})


def tree() -> HarnessTree:
    return HarnessTree.of([RULES, SKILL])


def test_a_well_formed_node_of_every_kind_is_admitted():
    nodes = [
        RULES,
        SKILL,
        Node("c", "command", {"name": "review", "text": "Review the diff."}),
        Node("m", "memory", {"text": "Q: 2 + 2\nA: 4", "tags": ["example"]}),
        Node("cfg", "config", {"settings": {"theme": "dark", "hideThinkingBlock": True}}),
        Node("ext", "extension", {"name": "guard", "text": "export default () => {}"}),
    ]
    assert len(admit_tree(HarnessTree.of(nodes))) == 6


@pytest.mark.parametrize("node_id", ["", "../etc", "a/b", "-dash", "x" * 65, "sp ace"])
def test_an_unsafe_id_is_refused(node_id):
    with pytest.raises(BadRequest):
        admit_node(Node(node_id, "rules", {"text": "x"}))


def test_an_unsafe_skill_name_is_refused_because_it_becomes_a_path():
    with pytest.raises(BadRequest, match="config.name"):
        admit_node(Node("s", "skill", {"name": "../../x", "text": "x"}))


@pytest.mark.parametrize("config", [{"text": ""}, {"text": "   "}, {}, {"text": 3}])
def test_a_rule_without_text_is_refused(config):
    with pytest.raises(BadRequest, match="config.text"):
        admit_node(Node("r", "rules", config))


def test_config_that_is_not_json_is_refused():
    with pytest.raises(BadRequest, match="config"):
        admit_node(Node("c", "config", {"settings": {"x": float("nan")}}))
    with pytest.raises(BadRequest, match="config"):
        admit_node(Node("c", "config", {"settings": {"x": object()}}))


@pytest.mark.parametrize(
    "text",
    [
        "use sk-proj-abcdefghijklmnopqrstuvwx when calling",
        "aws AKIAABCDEFGHIJKLMNOP",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "api_key = 3f2a9c1b7d4e5f60718293a4b5c6d7e8",
        'token: "dGhpcyBpcyBhIHNlY3JldCB0b2tlbjEyMzQ="',
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456",
        "-----BEGIN RSA PRIVATE KEY-----",
    ],
)
def test_the_credential_tripwire_refuses_key_shaped_literals(text):
    with pytest.raises(BadRequest, match="refused"):
        admit_node(Node("r", "memory", {"text": text}))


@pytest.mark.parametrize(
    "text",
    ["Keep the API key in the environment, never in code.", "a token is a unit of text", "task-1234 is done"],
)
def test_the_tripwire_lets_ordinary_prose_about_keys_through(text):
    refuse_credentials(text, "text")


@pytest.mark.parametrize("key", ["api_key", "apiKey", "token", "accessToken", "password", "client_secret"])
def test_config_keys_named_like_secrets_are_refused(key):
    with pytest.raises(BadRequest, match="secret"):
        admit_node(Node("c", "config", {"settings": {"nested": {key: "x"}}}))


@pytest.mark.parametrize("settings", [{"baseUrl": "x"}, {"defaultModel": "gpt"}, {"x": "https://api.example.com"}])
def test_config_cannot_bind_a_model_or_endpoint(settings):
    with pytest.raises(BadRequest, match="install time"):
        admit_node(Node("c", "config", {"settings": settings}))


def test_duplicate_ids_and_skill_names_are_refused():
    with pytest.raises(BadRequest, match="duplicate"):
        admit_tree(HarnessTree.of([RULES, RULES]))
    twin = Node("add2", "skill", {"name": "adding", "text": "again"})
    with pytest.raises(BadRequest, match="named"):
        admit_tree(HarnessTree.of([SKILL, twin]))


def test_mutations_create_update_and_remove_in_order():
    memory = Node("m1", "memory", {"text": "Q: 1 + 1\nA: 2"})
    after = apply_mutations(
        tree(),
        [
            Mutation.create(memory, after="rules"),
            Mutation.update("rules", {"text": "Reply with the number only."}),
            Mutation.remove("add"),
        ],
    )
    assert after.ids() == ["rules", "m1"]
    assert after.get("rules").text == "Reply with the number only."


def test_an_update_with_null_deletes_a_config_key():
    after = apply_mutations(tree(), [Mutation.update("add", {"description": None})])
    assert "description" not in after.get("add").config


def test_a_batch_with_one_bad_mutation_changes_nothing():
    before = tree()
    good = Mutation.create(Node("m1", "memory", {"text": "fine"}))
    leaky = Mutation.create(Node("m2", "memory", {"text": "key sk-abcdefghijklmnopqrstuvwxyz"}))
    with pytest.raises(BadRequest):
        apply_mutations(before, [good, leaky])
    assert before.ids() == ["rules", "add"]
    with pytest.raises(BadRequest, match="no node"):
        apply_mutations(before, [good, Mutation.remove("ghost")])


def test_the_wire_form_round_trips_and_names_bad_fields():
    raw = [
        {"op": "create", "node": {"id": "m", "kind": "memory", "config": {"text": "x"}}},
        {"op": "update", "id": "rules", "config": {"text": "y"}},
        {"op": "remove", "id": "add"},
    ]
    assert [m.to_json() for m in parse_mutations(raw)] == raw
    with pytest.raises(BadRequest, match=r"mutations\[0\].op"):
        parse_mutations([{"op": "rewrite"}])
    with pytest.raises(BadRequest, match=r"mutations\[0\].node.kind"):
        parse_mutations([{"op": "create", "node": {"id": "m", "kind": "poem", "config": {}}}])
    with pytest.raises(BadRequest, match="mutations"):
        parse_mutations([])


def test_loose_model_output_is_coerced_into_mutations_or_dropped():
    found = coerce_mutations(
        [{"kind": "rules", "text": "Be brief."}, "Say only the number.", 42, {"kind": "memory"}, {"op": "bad"}]
    )
    assert [m.node.text for m in found] == ["Be brief.", "Say only the number."]
    assert coerce_mutations(None) == [] and coerce_mutations("text") == []


def test_a_tree_diff_replays_to_the_same_tree():
    after = apply_mutations(tree(), [Mutation.remove("add"), Mutation.create(Node("m", "memory", {"text": "x"}))])
    assert apply_mutations(tree(), diff_trees(tree(), after)).to_json() == after.to_json()
    assert tree_from_json(after.to_json()) == after
