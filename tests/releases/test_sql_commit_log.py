"""`SqlCommitLog` (the commit log replicas share on PostgreSQL) behaves as the file commit log does."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from reef.releases import FileCommitLog
from reef.releases.sql_commit_log import SqlCommitLog
from reef.storage.sql import postgres_engine
from tests.conftest import PostgresSchema
from tests.releases.test_commit_log import commit

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine(postgres_schema: PostgresSchema) -> Iterator[sa.Engine]:
    opened = postgres_engine(postgres_schema.url, postgres_schema.name, 2)
    yield opened
    opened.dispose()


def test_steps_are_listed_in_order_per_scenario_and_survive_a_reopen(engine: sa.Engine) -> None:
    log = SqlCommitLog(engine)
    assert log.last("demo") is None
    appended = [commit(step) for step in range(1, 6)]
    for entry in appended:
        log.append(entry)
    log.append(commit(1, "team:beta"))
    reopened = SqlCommitLog(engine)
    assert reopened.list("demo") == appended
    assert [c.step for c in reopened.list("demo", after_step=1, limit=2)] == [2, 3]
    assert [c.scenario for c in reopened.list("team:beta")] == ["team:beta"]
    assert reopened.last("demo") == appended[-1]


def test_only_the_steps_that_consumed_a_record_are_listed(engine: sa.Engine) -> None:
    log = SqlCommitLog(engine)
    odd = 'rec-"ü"\\%_'
    log.append(dataclasses.replace(commit(1), consumed_record_ids=["rec-1", odd]))
    log.append(dataclasses.replace(commit(2), consumed_record_ids=["rec-10"]))  # "rec-1" is a prefix, not a match
    log.append(dataclasses.replace(commit(3, verdict="rejected"), consumed_record_ids=[odd], reason="rec-1"))
    assert [c.step for c in log.list("demo", record_id="rec-1")] == [1]
    assert [c.step for c in log.list("demo", record_id=odd)] == [1, 3]
    assert [c.step for c in log.list("demo", record_id=odd, after_step=1)] == [3]
    assert log.list("demo", record_id="rec-unknown") == []


def test_a_step_is_written_once(engine: sa.Engine) -> None:
    log = SqlCommitLog(engine)
    log.append(commit(1))
    with pytest.raises(sa.exc.IntegrityError):
        log.append(commit(1))


def test_a_file_log_from_before_is_adopted_once(engine: sa.Engine, tmp_path: Path) -> None:
    files = FileCommitLog(tmp_path / "commits")
    for step in (1, 2):
        files.append(commit(step, "team:a.b"))
    log = SqlCommitLog(engine)
    log.append(commit(1, "other"))
    files.append(commit(9, "other"))  # "other" has steps in the database already: its file is not copied
    assert log.adopt(files) == ["team:a.b"]
    assert log.list("team:a.b") == files.list("team:a.b")
    assert [c.step for c in log.list("other")] == [1]
    assert log.adopt(files) == []
