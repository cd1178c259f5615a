"""Reef's state is readable by its owner only, whatever the umask: the state directory, the record database (and
SQLite's journal beside it) and the release repository."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef.core.private_files import private_directory
from reef.core.records import Record
from reef.releases.git import open_release_store
from reef.storage.sql import SQLITE_FILENAME, open_record_store


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the common default: files 0644, directories 0755
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_directory_is_created_private(tmp_path: Path):
    state = private_directory(tmp_path / "deep" / "state")
    assert mode(state) == 0o700
    assert private_directory(state) == state and mode(state) == 0o700  # idempotent


def test_an_existing_directory_keeps_the_mode_its_operator_gave_it(tmp_path: Path, caplog):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    private_directory(shared)
    assert mode(shared) == 0o755 and "chmod 700" in caplog.text


def test_the_record_database_and_its_journal_are_private(tmp_path: Path):
    store = open_record_store("sqlite", directory=tmp_path / "records")
    try:
        store.append([Record.new("s", "inference", {"request": {}, "response": {}}, created_at=1.0)])
        assert mode(tmp_path / "records") == 0o700
        files = [path for path in (tmp_path / "records").iterdir() if path.name.startswith(SQLITE_FILENAME)]
        assert files and all(mode(path) == 0o600 for path in files), [(p.name, oct(mode(p))) for p in files]
    finally:
        store.close()


def test_the_release_repository_is_private(tmp_path: Path):
    open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    assert mode(tmp_path / "releases.git") == 0o700
