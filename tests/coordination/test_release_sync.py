"""Release sync: every head in one look at the repository, and PostgreSQL LISTEN/NOTIFY hints between replicas."""

from __future__ import annotations

import queue
import uuid
from pathlib import Path

import pytest

from reef.coordination.hints import PostgresReleaseHints
from reef.releases.git import GitReleaseStore


def test_head_ids_reads_every_scenario_head_at_once(tmp_path: Path) -> None:
    store = GitReleaseStore(str(tmp_path / "releases.git"), tmp_path / "work")
    content = tmp_path / "content"
    content.mkdir()
    (content / "rules.md").write_text("one\n")
    heads = {}
    for scenario in ("math", "team:a.b"):  # names that ref names encode
        first = store.publish(scenario, content, None, operation="creation")
        (content / "rules.md").write_text(f"{scenario}\n")
        heads[scenario] = store.publish(scenario, content, first.release_id).release_id
    assert store.head_ids(["math", "team:a.b", "absent"]) == {**heads, "absent": None}
    assert all(store.head(name).release_id == release_id for name, release_id in heads.items())  # type: ignore[union-attr]


@pytest.mark.postgres
def test_a_publish_hint_reaches_the_other_replicas_of_the_deployment_only(postgres_url: str) -> None:
    deployment = f"test-{uuid.uuid4().hex}"
    heard: queue.Queue[str] = queue.Queue()
    elsewhere: queue.Queue[str] = queue.Queue()
    listener = PostgresReleaseHints(postgres_url, deployment)
    other = PostgresReleaseHints(postgres_url, deployment + "-other")
    sender = PostgresReleaseHints(postgres_url, deployment)
    listener.listen(heard.put)
    other.listen(elsewhere.put)
    try:
        # LISTEN starts in the listener's thread: announce until it is heard (a hint before it is simply lost).
        for _ in range(100):
            sender.announce("math")
            try:
                assert heard.get(timeout=0.2) == "math"
                break
            except queue.Empty:
                continue
        else:
            raise AssertionError("no hint heard")
        assert elsewhere.empty()
    finally:
        for hints in (listener, other, sender):
            hints.close()
