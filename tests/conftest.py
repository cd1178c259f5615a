"""Shared fixtures and the test tiers' guards. Area-specific fixtures live in each tests/<area>/conftest.py.

Tiers (docs/developer/testing.md): `model` tests use the real SmolLM2, `e2e` tests start a server process, a
browser, Ray, an agent binary or schemathesis, `postgres` tests need PostgreSQL. `make test-fast` runs
`-m "not model and not e2e"`. Two guards keep the markers honest: a test that asks for a real-model fixture
without `model` fails at collection, and one that starts `reef serve` without `e2e` fails when it tries.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))


def _share_the_cores() -> None:
    """Side by side (pytest-xdist), each worker and the processes it starts get their share of the cores: two
    workers whose OpenMP threads each ask for every core spin against each other."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not os.environ.get("PYTEST_XDIST_WORKER") or workers < 2 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, len(os.sched_getaffinity(0)) // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


_share_the_cores()

from tests.fakes import reef_process  # noqa: E402 - after the path above

POSTGRES_URL = os.environ.get("REEF_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

# Fixtures that load or convert the real SmolLM2 (tests/inference/local/conftest.py, tests/training/conftest.py).
MODEL_FIXTURES = frozenset({"model_dir", "local_settings", "tokenizer", "base_model_path", "greedy_rollout"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "postgres_url" in getattr(item, "fixturenames", ()) and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.postgres)
    unmarked = [
        item.nodeid
        for item in items
        if MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())) and item.get_closest_marker("model") is None
    ]
    if unmarked:
        raise pytest.UsageError("tests that use the real model must be marked `model`: " + ", ".join(unmarked))
    _longest_files_first(items)


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Files with a `model` test first, then files with an `e2e` test, then the rest; a file's tests stay together
    and in order. Parallel workers (`make test`: one file per worker at a time) then end on short files."""
    rank: dict[str, int] = {}
    for item in items:
        mark = 0 if item.get_closest_marker("model") else 1 if item.get_closest_marker("e2e") else 2
        rank[item.path.as_posix()] = min(mark, rank.get(item.path.as_posix(), 2))
    items.sort(key=lambda item: rank[item.path.as_posix()])


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Set before any fixture of the test runs (module-scoped ones included), so a fixture starting a server counts.
    reef_process.ReefProcess.allowed_here = item.get_closest_marker("e2e") is not None


@dataclasses.dataclass(frozen=True)
class PostgresSchema:
    """A fresh schema in the test database: `url` (libpq form), `name`, and `url_with_search_path` for a server."""

    url: str
    name: str

    @property
    def sqlalchemy_url(self) -> str:
        """`url` with the psycopg 3 driver named, as SQLAlchemy takes it."""
        return "postgresql+psycopg://" + self.url.split("://", 1)[1]

    @property
    def url_with_search_path(self) -> str:
        """`url` whose connections use this schema (for a `reef serve` child)."""
        return f"{self.url}?options=-csearch_path%3D{self.name}"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test database's libpq URL; skips the test when PostgreSQL is not reachable there."""
    import psycopg

    url = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable at {url} (set REEF_TEST_POSTGRES_URL): {exc}".strip())
    return url


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[PostgresSchema]:
    """A schema of its own for one test, created empty and dropped (with everything in it) afterwards."""
    import psycopg

    schema = PostgresSchema(postgres_url, "reef_test_" + uuid.uuid4().hex[:12])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema.name}"')
    yield schema
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema.name}" CASCADE')
