"""The `RecordStore` contract, run against every backend (see conftest: SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools

import pytest

from reef.core.errors import Conflict
from reef.core.records import Record
from reef.storage import RecordStore, SqlRecordStore
from reef.storage.base import RolloutRow, ScenarioControl

from .conftest import OpenStore

_clock = itertools.count(1_700_000_000)


def record(scenario: str = "s", n: int = 0, *, rid: str | None = None, size: int = 0) -> Record:
    """A fresh inference record; `created_at` rises with every call so 'oldest' is well defined."""
    payload = {"request": {"n": n}, "response": "x" * size}
    return Record.new(scenario, "inference", payload, created_at=float(next(_clock)), agent_record_id=rid)


def test_an_appended_record_reads_back_as_it_was_given(store: RecordStore) -> None:
    given = record(n=7)
    (stored,) = store.append([given])
    assert stored.sequence == 1
    assert stored.body_bytes > 0
    read = store.get(given.agent_record_id)
    assert read == stored
    assert read is not None
    assert (read.payload, read.content_hash, read.created_at) == (given.payload, given.content_hash, given.created_at)
    assert read.consumed_step is None


def test_an_unknown_id_reads_as_none(store: RecordStore) -> None:
    assert store.get("rec_missing") is None
    assert store.get_many(["rec_missing"]) == {}


def test_sequences_count_from_one_within_each_scenario(store: RecordStore) -> None:
    first = store.append([record("a", 1), record("b", 1), record("a", 2)])
    second = store.append([record("b", 2), record("a", 3)])
    assert [(r.scenario, r.sequence) for r in first + second] == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]


def test_an_empty_append_stores_nothing(store: RecordStore) -> None:
    assert store.append([]) == []
    assert store.page("s") == []


def test_a_retry_with_the_same_content_returns_the_stored_record(store: RecordStore) -> None:
    original = record(n=1, rid="rec_retry")
    (stored,) = store.append([original])
    retried = store.append([original, record(n=2)])
    assert retried[0] == stored
    assert retried[1].sequence == 2
    assert len(store.page("s")) == 2


def test_a_conflicting_retry_is_refused_and_stores_nothing_of_its_call(store: RecordStore) -> None:
    store.append([record(n=1, rid="rec_taken")])
    innocent = record(n=2)
    with pytest.raises(Conflict, match="rec_taken"):
        store.append([innocent, record(n=99, rid="rec_taken")])
    assert store.get(innocent.agent_record_id) is None
    assert store.get("rec_taken").payload == {"request": {"n": 1}, "response": ""}  # type: ignore[union-attr]
    # The refused call consumed no sequence: the next record follows on.
    assert store.append([record(n=3)])[0].sequence == 2


def test_the_same_id_twice_in_one_call_is_stored_once(store: RecordStore) -> None:
    once = record(n=1, rid="rec_twice")
    stored = store.append([once, once])
    assert stored[0] == stored[1]
    assert len(store.page("s")) == 1
    with pytest.raises(Conflict):
        store.append([record(n=5, rid="rec_dup"), record(n=6, rid="rec_dup")])
    assert store.get("rec_dup") is None


async def test_concurrent_async_appends_are_all_durable_with_unique_sequences(store: SqlRecordStore) -> None:
    async def caller(c: int) -> list[Record]:
        acked: list[Record] = []
        for n in range(5):
            acked += await store.append_async([record("busy", c * 100 + n)])
        return acked

    acked = [r for batch in await asyncio.gather(*(caller(c) for c in range(64))) for r in batch]
    assert sorted(r.sequence for r in acked) == list(range(1, 321))  # type: ignore[type-var]
    stored = store.get_many([r.agent_record_id for r in acked])
    assert {rid: r.sequence for rid, r in stored.items()} == {r.agent_record_id: r.sequence for r in acked}
    stats = store.stats()
    assert stats.appends >= 320
    assert stats.largest_group > 1, "concurrent callers should share a commit"


def test_concurrent_blocking_appends_from_threads_are_all_durable(store: SqlRecordStore) -> None:
    def caller(c: int) -> list[Record]:
        return [r for n in range(10) for r in store.append([record("threads", c * 100 + n)])]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        acked = [r for batch in pool.map(caller, range(16)) for r in batch]
    assert sorted(r.sequence for r in acked) == list(range(1, 161))  # type: ignore[type-var]
    assert len(store.get_many([r.agent_record_id for r in acked])) == 160


async def test_a_conflict_in_one_concurrent_caller_does_not_fail_the_others(store: RecordStore) -> None:
    await store.append_async([record(n=0, rid="rec_owned")])
    calls = [store.append_async([record(n=i)]) for i in range(8)]
    calls.insert(4, store.append_async([record(n=42), record(n=1, rid="rec_owned")]))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(outcomes[4], Conflict)
    assert all(isinstance(o, list) for i, o in enumerate(outcomes) if i != 4)
    assert len(store.page("s")) == 9


async def test_a_cancelled_caller_leaves_the_writer_serving_the_rest(store: RecordStore) -> None:
    given = record(n=1)
    abandoned = asyncio.ensure_future(store.append_async([given]))
    await asyncio.sleep(0)  # the task runs up to its await: its records are queued
    abandoned.cancel()
    (later,) = await store.append_async([record(n=2)])
    # The abandoned append was already queued: it commits, and the caller just never hears of it.
    assert store.get(given.agent_record_id) is not None
    assert later.sequence == 2


async def test_sync_and_async_appends_share_one_sequence(store: RecordStore) -> None:
    sync = await asyncio.to_thread(store.append, [record(n=1)])
    (async_,) = await store.append_async([record(n=2)])
    assert [sync[0].sequence, async_.sequence] == [1, 2]


def test_pages_follow_sequences_after_a_cursor(store: RecordStore) -> None:
    store.append([record("p", n) for n in range(10)])
    store.append([record("other", 0)])
    first = store.page("p", limit=4)
    rest = store.page("p", after_sequence=first[-1].sequence or 0, limit=100)
    assert [r.sequence for r in first] == [1, 2, 3, 4]
    assert [r.sequence for r in rest] == [5, 6, 7, 8, 9, 10]
    assert [r.payload["request"]["n"] for r in first + rest] == list(range(10))  # type: ignore[index]
    assert store.page("p", after_sequence=10) == []
    assert store.page("unknown") == []


def test_get_many_returns_only_the_ids_that_exist(store: RecordStore) -> None:
    stored = store.append([record(n=n) for n in range(3)])
    ids = [r.agent_record_id for r in stored]
    assert store.get_many([*ids, "rec_missing"]) == {r.agent_record_id: r for r in stored}


def test_marked_records_carry_the_learner_step(store: RecordStore) -> None:
    stored = store.append([record(n=n) for n in range(3)])
    store.mark_consumed([stored[0].agent_record_id, stored[2].agent_record_id, "rec_missing"], step=4)
    assert [r.consumed_step for r in store.page("s")] == [4, None, 4]


def test_retention_evicts_the_oldest_bodies_and_keeps_their_hashes(store: RecordStore) -> None:
    stored = store.append([record(n=n, size=1000) for n in range(5)])
    per_body = stored[0].body_bytes
    assert store.enforce_retention(max_body_bytes=per_body * 10) == 0
    assert store.enforce_retention(max_body_bytes=per_body * 2) == 3
    after = store.page("s")
    assert [r.payload is None for r in after] == [True, True, True, False, False]
    assert [r.content_hash for r in after] == [r.content_hash for r in stored]
    assert [r.body_bytes for r in after][:3] == [0, 0, 0]
    assert after[0].summary()["evicted"] is True
    # A retry of an evicted record is still recognised by its hash.
    assert store.append([stored[0]])[0].sequence == 1


def test_a_scenario_is_created_once_archived_and_brought_back(store: RecordStore) -> None:
    info, created = store.ensure_scenario("alpha", "basic")
    assert created and (info.name, info.recipe, info.archived) == ("alpha", "basic", False)
    again, created_again = store.ensure_scenario("alpha", "sft")
    assert not created_again and again == info
    store.ensure_scenario("beta", "basic")
    assert [s.name for s in store.scenarios()] == ["alpha", "beta"]

    assert store.archive_scenario("alpha")
    assert store.scenario("alpha") is None
    assert [s.name for s in store.scenarios()] == ["beta"]
    assert not store.archive_scenario("never")

    back, created_back = store.ensure_scenario("alpha", "sft")
    assert created_back and (back.recipe, back.archived) == ("sft", False)
    assert store.scenario("alpha") == back


def test_an_archived_scenario_keeps_its_records(store: RecordStore) -> None:
    store.ensure_scenario("s", "basic")
    store.append([record(n=1)])
    store.archive_scenario("s")
    assert len(store.page("s")) == 1


def test_a_scenario_control_is_stored_replaced_and_survives_a_reopen(open_store: OpenStore) -> None:
    first = open_store()
    assert first.control("s") == ScenarioControl()  # nothing set: the deployment's mode, not paused
    first.set_control("s", ScenarioControl("manual", False, {"step_id": "stp_1", "text": "ünïcode"}))
    first.set_control("s", ScenarioControl("hybrid", True, {"step_id": "stp_2", "text": None}))
    first.set_control("t", ScenarioControl(None, True))
    first.close()

    second = open_store()
    assert second.control("s") == ScenarioControl("hybrid", True, {"step_id": "stp_2", "text": None})
    assert second.control("t") == ScenarioControl(None, True, None)


async def test_a_reopened_store_shows_every_acknowledged_record(open_store: OpenStore) -> None:
    first = open_store()
    acked = first.append([record(n=n) for n in range(3)])
    acked += [
        r for batch in await asyncio.gather(*(first.append_async([record(n=n)]) for n in range(20))) for r in batch
    ]
    first.ensure_scenario("s", "basic")
    first.mark_consumed([acked[0].agent_record_id], step=1)
    first.close()

    second = open_store()
    assert second.get_many([r.agent_record_id for r in acked]).keys() == {r.agent_record_id for r in acked}
    assert second.get(acked[0].agent_record_id).consumed_step == 1  # type: ignore[union-attr]
    assert second.scenario("s") is not None
    assert second.append([record(n=99)])[0].sequence == 24


async def test_two_replicas_appending_the_same_records_store_one_copy(open_store: OpenStore) -> None:
    replicas = [open_store(), open_store()]
    shared = [record(n=n) for n in range(40)]
    calls = [replicas[i % 2].append_async([r]) for r in shared for i in range(2)]
    calls += [replicas[i % 2].append_async([record(n=100 + i)]) for i in range(20)]
    outcomes = await asyncio.gather(*calls)
    for first, second in zip(outcomes[:80:2], outcomes[1:80:2], strict=True):
        assert first == second
    stored = replicas[0].page("s", limit=1000)
    assert [r.sequence for r in stored] == list(range(1, 61))


def test_a_closed_store_refuses_appends(store: RecordStore) -> None:
    store.close()
    with pytest.raises(RuntimeError):
        store.append([record()])


def test_an_inference_keeps_the_release_and_the_rollout_that_served_it(store: RecordStore) -> None:
    payload = {"request": {}, "response": {}, "release_id": "r-canary", "rollout_id": "rollout_1"}
    (stored,) = store.append([Record.new("s", "inference", payload, created_at=1.0)])
    again = store.get(stored.agent_record_id)
    assert again is not None and again.release_id() == "r-canary"
    assert again.payload is not None and again.payload["rollout_id"] == "rollout_1"
    assert [r.agent_record_id for r in store.page("s", release_id="r-canary")] == [stored.agent_record_id]


def test_a_rollout_document_is_written_by_compare_and_swap_and_survives_a_reopen(open_store: OpenStore) -> None:
    store = open_store()
    assert store.rollout("s") == RolloutRow()
    assert store.put_rollout("s", {"rollout_id": "a", "state": "canary"}, 0)
    assert not store.put_rollout("s", {"rollout_id": "b", "state": "canary"}, 0)  # someone wrote first
    assert store.put_rollout("s", {"rollout_id": "a", "state": "promoted"}, 1)
    assert not store.put_rollout("s", {"rollout_id": "a", "state": "rolled_back"}, 1)
    store.set_rollout_mode("s", "canary")
    store.close()
    reopened = open_store()
    row = reopened.rollout("s")
    assert row == RolloutRow(mode="canary", document={"rollout_id": "a", "state": "promoted"}, version=2)
    assert reopened.rollouts() == {"s": row}


def test_a_rollout_mode_alone_leaves_the_document_to_its_first_writer(store: RecordStore) -> None:
    store.set_rollout_mode("s", "canary")
    assert store.rollout("s") == RolloutRow(mode="canary", document=None, version=0)
    assert store.put_rollout("s", {"rollout_id": "a"}, 0)
    store.set_rollout_mode("s", None)
    assert store.rollout("s") == RolloutRow(mode=None, document={"rollout_id": "a"}, version=1)


def test_failed_requests_are_counted_per_rollout_arm(store: RecordStore) -> None:
    for arm in ("candidate", "candidate", "incumbent"):
        store.count_rollout_error("rollout_1", arm)
    store.count_rollout_error("rollout_2", "candidate")
    assert store.rollout_errors("rollout_1") == {"candidate": 2, "incumbent": 1}
    assert store.rollout_errors("rollout_3") == {}
