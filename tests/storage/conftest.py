"""The record store under test: SQLite in tmp_path and PostgreSQL (a fresh schema per test, see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reef.storage import SqlRecordStore, open_record_store

OpenStore = Callable[[], SqlRecordStore]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens the store under test, again each call (to test reopening); everything opened is closed after."""
    opened: list[SqlRecordStore] = []
    schema = request.getfixturevalue("postgres_schema") if request.param == "postgres" else None

    def open_one() -> SqlRecordStore:
        if schema is None:
            store = open_record_store("sqlite", directory=tmp_path / "store")
        else:
            store = open_record_store("postgres", database_url=schema.url, schema=schema.name)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: OpenStore) -> SqlRecordStore:
    return open_store()
