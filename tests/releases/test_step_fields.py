"""A learner step's release carries what it consumed and what it grew from as fields of its own; a release stored
when these rode in its metrics loads them from there, and users see the same metrics either way."""

from __future__ import annotations

import json

from reef.core.releases import Release
from reef.releases.git_objects import release_of


def test_a_published_step_carries_its_consumed_records_and_what_it_was_trained_from(store, open_store, content):
    base = store.publish("demo", content("v1", {"a": "1"}), None, operation="creation")
    step = store.publish(
        "demo",
        content("v2", {"a": "2"}),
        base.release_id,
        step=1,
        metrics={"score": 0.5},
        consumed_record_ids=["r1", "r2"],
        trained_from=base.release_id,
    )
    read = open_store("b").head("demo")  # another replica reads it back from the repository
    assert read == step
    assert read.consumed_record_ids == ("r1", "r2") and read.trained_from == base.release_id
    assert read.metrics == {"score": 0.5} and read.lineage_base is None
    assert read.to_json()["metrics"] == {
        "score": 0.5,
        "trained_from": base.release_id,
        "consumed_record_ids": ["r1", "r2"],
    }
    assert base.consumed_record_ids is None and base.to_json()["metrics"] == {}


def test_a_lineage_tip_carries_the_serving_release_it_grew_beside(store, open_store, content):
    base = store.publish("demo", content("v1", {"a": "1"}), None, operation="creation")
    tip = store.keep_lineage(
        "demo",
        content("tip", {"a": "t"}),
        base.release_id,
        step=1,
        metrics={"score": 0.0},
        lineage_base=base.release_id,
        consumed_record_ids=["r1"],
    )
    read = open_store("b").lineage("demo")
    assert read == tip and read.lineage_base == base.release_id and read.consumed_record_ids == ("r1",)
    assert read.to_json()["metrics"] == {"score": 0.0, "lineage_base": base.release_id, "consumed_record_ids": ["r1"]}


def test_a_release_stored_with_its_step_fields_in_its_metrics_still_loads_them(store, open_store, content):
    base = store.publish("demo", content("v1", {"a": "1"}), None, operation="creation")
    # What the learner published before the fields had keys of their own: the metrics carried them.
    shown = {"score": 0.5, "trained_from": base.release_id, "consumed_record_ids": ["r1"]}
    store.publish("demo", content("v2", {"a": "2"}), base.release_id, step=1, metrics=dict(shown))
    read = open_store("b").head("demo")
    assert read is not None
    assert read.consumed_record_ids == ("r1",) and read.trained_from == base.release_id
    assert read.metrics == {"score": 0.5}
    assert read.to_json()["metrics"] == shown


OLD_TIP_MANIFEST = {
    "format": 1,
    "scenario": "demo",
    "parent_release_id": "b" * 40,
    "content_id": "c" * 64,
    "operation": "training",
    "step": 3,
    "recipe": "sft",
    "metrics": {"score": 0.25, "lineage_base": "a" * 40, "consumed_record_ids": ["r7", "r8"]},
    "created_at": 1700000000.0,
    "pending": False,
    "lineage": True,
    "files": {},
}


def test_an_old_lineage_tips_manifest_gives_its_base_and_consumed_records() -> None:
    release = release_of("d" * 40, json.loads(json.dumps(OLD_TIP_MANIFEST)))
    assert release.lineage_base == "a" * 40 and release.consumed_record_ids == ("r7", "r8")
    assert release.trained_from is None and release.metrics == {"score": 0.25}
    assert release.to_json()["metrics"] == OLD_TIP_MANIFEST["metrics"]


def test_a_release_no_step_stored_shows_its_metrics_as_they_are() -> None:
    release = Release("r", "demo", None, "c", "rollback", 2, "sft", {"trained_from": "x"}, 0.0)
    assert release.consumed_record_ids is None and release.to_json()["metrics"] == {"trained_from": "x"}
