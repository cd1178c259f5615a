"""A request's release pin (`x-reef-release-id`) is looked up off the event loop, and an unknown one is remembered:
a client repeating a bad pin costs one store lookup, not one `git rev-list` on the loop per request."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reef.application import serving
from reef.core.errors import NotFound
from tests.fakes.learning_world import QUESTIONS, make_world, started

UNKNOWN = "f" * 40
Q = list(QUESTIONS)


class CountingStore:
    """Wraps the release store's lookups: how often each ran, and on which threads."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.calls = 0
        self.threads: set[int] = set()
        self.get, self.lineage = self._counted(store.get), self._counted(store.lineage)

    def _counted(self, method: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.threads.add(threading.get_ident())
            return method(*args, **kwargs)

        return counted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_an_unknown_pin_is_looked_up_once_in_a_worker_thread_then_answered_from_memory(tmp_path):
    world = await started(make_world(tmp_path))
    store = CountingStore(world.runtime.serving.release_store)
    world.runtime.serving.release_store = store

    for _ in range(5):
        with pytest.raises(NotFound, match=UNKNOWN):
            await world.runtime.route_request("math", UNKNOWN, {})

    assert store.calls >= 1 and threading.get_ident() not in store.threads  # never on the event loop
    looked_up = store.calls
    with pytest.raises(NotFound):
        await world.runtime.route_request("math", UNKNOWN, {})
    assert store.calls == looked_up  # remembered: no lookup for the repeats


async def test_a_known_pin_is_read_off_the_loop_once_and_served_from_its_files(tmp_path):
    world = await started(make_world(tmp_path))
    for q in Q[:2]:
        world.report("math", q, QUESTIONS[q])
    assert (await world.runtime.step("math"))["verdict"] == "published"
    base = world.releases("math")[-1]["release_id"]  # no longer the serving release
    store = CountingStore(world.runtime.serving.release_store)
    world.runtime.serving.release_store = store

    first, _ = await world.runtime.route_request("math", base, {})
    looked_up = store.calls
    again, _ = await world.runtime.route_request("math", base, {})

    assert first.release_id == again.release_id == base and first.candidate_path is not None
    assert looked_up >= 1 and store.calls == looked_up and threading.get_ident() not in store.threads


async def test_an_unknown_pin_is_looked_up_again_once_the_scenario_serves_a_new_release(tmp_path, monkeypatch):
    world = await started(make_world(tmp_path))
    with pytest.raises(NotFound):
        await world.runtime.route_request("math", UNKNOWN, {})
    store = CountingStore(world.runtime.serving.release_store)
    world.runtime.serving.release_store = store
    (base,) = world.releases("math")

    await world.runtime.serving.activate("math", world.runtime.release_store.get("math", base["release_id"]))
    with pytest.raises(NotFound):
        await world.runtime.route_request("math", UNKNOWN, {})
    assert store.calls >= 1  # the publish made the store worth asking again

    # And the memory of a miss lasts only a while.
    monkeypatch.setattr(serving, "MISSING_PIN_TTL_S", 0.0)
    world.runtime.serving._missing.clear()
    with pytest.raises(NotFound):
        await world.runtime.route_request("math", UNKNOWN, {})
    counted = store.calls
    with pytest.raises(NotFound):
        await world.runtime.route_request("math", UNKNOWN, {})
    assert store.calls > counted
