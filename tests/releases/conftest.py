"""Fixtures for the release store: the same suite runs on a local bare repo and on a remote reached by URL."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reef.releases.git import GitReleaseStore

OpenStore = Callable[[str], GitReleaseStore]


@pytest.fixture(params=["local", "remote"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A local bare repository path (created by the store), or the URL of a second repo used as a remote."""
    if request.param == "local":
        return str(tmp_path / "releases.git")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    return remote.as_uri()


@pytest.fixture
def open_store(repository: str, tmp_path: Path) -> OpenStore:
    """Opens a store on the shared repository with its own work dir (another replica or machine)."""
    return lambda machine: GitReleaseStore(repository, tmp_path / f"work-{machine}")


@pytest.fixture
def store(open_store: OpenStore) -> GitReleaseStore:
    return open_store("a")


def write_tree(root: Path, files: dict[str, bytes | str]) -> Path:
    """Create a content directory holding `files` (relative path -> content)."""
    root.mkdir(parents=True, exist_ok=True)
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            target.write_text(data)
        else:
            target.write_bytes(data)
    return root


@pytest.fixture
def content(tmp_path: Path) -> Callable[[str, dict[str, bytes | str]], Path]:
    """Makes named content directories under tmp_path."""
    return lambda name, files: write_tree(tmp_path / "content" / name, files)
