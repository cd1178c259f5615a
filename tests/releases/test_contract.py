"""The `ReleaseStore` contract, run on a local bare repository and on a second repository used as a remote."""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
from pathlib import Path

import pytest

from reef.core.errors import BadRequest, Conflict, NotFound
from reef.releases.content import content_id_of_directory

MISSING_ID = "0123456789abcdef0123456789abcdef01234567"


def test_a_new_scenario_has_no_head_and_no_releases(store):
    assert store.head("demo") is None
    assert store.list("demo") == []


def test_a_first_publish_becomes_the_head_with_its_metadata(store, content):
    tree = content("v1", {"AGENTS.md": "be brief\n", "skills/sum/SKILL.md": "add numbers"})
    release = store.publish("demo", tree, None, operation="creation", step=0, recipe="evolve", metrics={"score": 0.25})
    assert store.head("demo") == release
    assert release.parent_release_id is None
    assert release.operation == "creation"
    assert release.recipe == "evolve"
    assert release.metrics == {"score": 0.25}
    assert release.content_id == content_id_of_directory(tree)
    assert not release.pending


def test_a_publish_with_a_stale_parent_is_refused(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    second = store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1)
    with pytest.raises(Conflict):
        store.publish("demo", content("v3", {"a": "3"}), first.release_id, step=2)
    with pytest.raises(Conflict):
        store.publish("demo", content("v4", {"a": "4"}), None, step=2)
    assert store.head("demo") == second


def test_of_two_concurrent_publishers_on_the_same_parent_exactly_one_wins(open_store, content):
    stores = [open_store("a"), open_store("b")]
    parent = stores[0].publish("demo", content("base", {"a": "0"}), None)
    for round_number in range(3):
        barrier = threading.Barrier(2)
        outcomes: list[object] = [None, None]

        def publish(
            index: int,
            parent_id: str = parent.release_id,
            n: int = round_number,
            barrier: threading.Barrier = barrier,
            outcomes: list[object] = outcomes,
        ) -> None:
            tree = content(f"r{n}-{index}", {"a": f"{n}-{index}"})
            barrier.wait()
            try:
                outcomes[index] = stores[index].publish("demo", tree, parent_id, step=n + 1)
            except Conflict as error:
                outcomes[index] = error

        threads = [threading.Thread(target=publish, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [o for o in outcomes if not isinstance(o, Conflict)]
        assert len(winners) == 1, outcomes
        assert stores[1].head("demo") == winners[0]
        parent = winners[0]


def test_a_rollback_is_a_new_release_whose_parent_is_the_previous_head(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None, operation="creation")
    second = store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1)
    rolled = store.republish("demo", first.release_id, "rollback")
    assert rolled.release_id not in (first.release_id, second.release_id)
    assert rolled.parent_release_id == second.release_id
    assert rolled.operation == "rollback"
    assert rolled.content_id == first.content_id
    assert store.head("demo") == rolled
    assert [r.release_id for r in store.list("demo")] == [rolled.release_id, second.release_id, first.release_id]
    assert (store.materialize(rolled) / "a").read_text() == "1"


def test_rolling_back_to_the_serving_release_is_refused(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    with pytest.raises(Conflict):
        store.republish("demo", first.release_id, "rollback")


def test_an_unknown_release_id_is_not_found(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    for unknown in (MISSING_ID, "not-a-commit", first.release_id[:12]):
        with pytest.raises(NotFound):
            store.get("demo", unknown)
        with pytest.raises(NotFound):
            store.republish("demo", unknown, "rollback")
    with pytest.raises(NotFound):
        store.materialize(dataclasses.replace(first, release_id=MISSING_ID))


def test_a_release_of_another_scenario_is_not_found_in_this_one(store, content):
    other = store.publish("other", content("v1", {"a": "1"}), None)
    with pytest.raises(NotFound):
        store.get("demo", other.release_id)
    with pytest.raises(NotFound):
        store.republish("demo", other.release_id, "rollback")


def test_a_pending_release_is_stored_but_not_served_until_promoted(open_store, content):
    store, replica = open_store("a"), open_store("b")
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    pending = store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1, pending=True)
    assert pending.pending
    assert store.head("demo") == first
    assert replica.get("demo", pending.release_id) == pending
    assert pending.release_id in [r.release_id for r in replica.list("demo")]
    promoted = replica.republish("demo", pending.release_id, "promote")
    assert promoted.operation == "promote"
    assert not promoted.pending
    assert promoted.parent_release_id == first.release_id
    assert promoted.content_id == pending.content_id
    assert store.head("demo") == promoted


def test_materialized_content_equals_the_published_content_and_is_read_only(open_store, content):
    store, replica = open_store("a"), open_store("b")
    tree = content(
        "v1",
        {
            "AGENTS.md": "rules\n",
            "skills/a/SKILL.md": "skill",
            "adapter/adapter_model.safetensors": os.urandom(4096),
            "adapter/adapter_config.json": "{}",
            "bin/run.sh": "#!/bin/sh\necho hi\n",
        },
    )
    (tree / "bin/run.sh").chmod(0o755)
    release = store.publish("demo", tree, None)
    for reader in (store, replica):
        directory = reader.materialize(release)
        assert content_id_of_directory(directory) == release.content_id
        assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()) == sorted(
            p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()
        )
        for path in [directory, *directory.rglob("*")]:
            assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
        assert os.access(directory / "bin/run.sh", os.X_OK)
        assert reader.materialize(release) == directory  # cached by release id


def test_another_replica_sees_releases_published_elsewhere(open_store, content):
    writer, reader = open_store("a"), open_store("b")
    assert reader.head("demo") is None
    first = writer.publish("demo", content("v1", {"a": "1"}), None)
    assert reader.head("demo") == first
    second = reader.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1)
    assert writer.head("demo") == second


def test_a_publish_failing_before_the_ref_update_leaves_the_old_head(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)

    for stage in ("objects-written", "before-ref-update"):

        def crash(at: str, stage: str = stage) -> None:
            if at == stage:
                raise RuntimeError(f"injected fault at {at}")

        store._fault_hook = crash
        with pytest.raises(RuntimeError):
            store.publish("demo", content(f"crash-{stage}", {"a": stage}), first.release_id, step=1)
        assert store.head("demo") == first
        assert len(store.list("demo")) == 1


def test_a_publish_failing_after_the_ref_update_leaves_the_new_head(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)

    def crash(at: str) -> None:
        if at == "ref-updated":
            raise RuntimeError("injected fault")

    store._fault_hook = crash
    with pytest.raises(RuntimeError):
        store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1)
    head = store.head("demo")
    assert head.parent_release_id == first.release_id
    assert (store.materialize(head) / "a").read_text() == "2"


def test_list_is_newest_first_and_includes_pending_releases(store, content):
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    second = store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1)
    pending = store.publish("demo", content("v3", {"a": "3"}), second.release_id, step=2, pending=True)
    assert [r.release_id for r in store.list("demo")] == [pending.release_id, second.release_id, first.release_id]


def test_archiving_a_scenario_hides_its_releases_and_frees_its_name(open_store, content):
    store, replica = open_store("a"), open_store("b")
    first = store.publish("demo", content("v1", {"a": "1"}), None)
    store.publish("demo", content("v2", {"a": "2"}), first.release_id, step=1, pending=True)
    prefix = store.archive("demo")
    assert prefix is not None and prefix.startswith("refs/reef/archive/demo-")
    assert replica.head("demo") is None
    assert replica.list("demo") == []
    assert store.archive("demo") is None
    again = replica.publish("demo", content("v3", {"a": "3"}), None, operation="creation")
    assert store.head("demo") == again


def test_scenario_names_with_colons_and_dots_are_stored(store, content):
    for name in ("team:agent.v1", "...", "a.lock"):
        release = store.publish(name, content(name, {"a": name}), None)
        assert store.head(name) == release
        assert release.scenario == name


def test_a_scenario_named_dot_dot_is_refused_and_nothing_is_published(store, content):
    with pytest.raises(BadRequest) as refused:
        store.publish("..", content("up", {"a": "1"}), None)
    assert refused.value.field == "scenario"


def test_content_using_a_reserved_name_is_refused(store, content):
    with pytest.raises(BadRequest):
        store.publish("demo", content("bad", {"reef-release.json": "{}"}), None)
    with pytest.raises(BadRequest):
        store.publish("demo", Path("/nonexistent/reef/content"), None)
    assert store.head("demo") is None
