"""The record store under test: SQLite in tmp_path and PostgreSQL (a fresh schema per test) at 127.0.0.1:5432."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from reef.storage import SqlRecordStore, open_record_store

POSTGRES_URL = os.environ.get("REEF_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
OpenStore = Callable[[], SqlRecordStore]


def _libpq_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(scope="session")
def postgres_reachable() -> bool:
    try:
        psycopg.connect(_libpq_url(POSTGRES_URL), connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens the store under test, again each call (to test reopening); everything opened is closed after."""
    opened: list[SqlRecordStore] = []
    schema = None
    if request.param == "postgres":
        if not request.getfixturevalue("postgres_reachable"):
            pytest.skip("PostgreSQL is not reachable at 127.0.0.1:5432")
        schema = "reef_test_" + uuid.uuid4().hex[:12]

    def open_one() -> SqlRecordStore:
        if request.param == "sqlite":
            store = open_record_store("sqlite", directory=tmp_path / "store")
        else:
            store = open_record_store("postgres", database_url=POSTGRES_URL, schema=schema)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()
    if schema is not None:
        with psycopg.connect(_libpq_url(POSTGRES_URL), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def store(open_store: OpenStore) -> SqlRecordStore:
    return open_store()
