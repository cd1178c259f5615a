"""What a searching recipe (`tttd`, `tttd-mean`) offers beyond a Recipe: its archive and the next step, read from a
release directory (the archive rides in each release)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SearchRecipe(Protocol):
    """A recipe whose releases carry a search archive."""

    def archive_view(self, release_dir: Path, limit: int) -> dict[str, Any]:
        """The problem, the last step and the top `limit` entries of the archive in `release_dir`."""
        ...

    def next_step(self, release_dir: Path, groups: int) -> dict[str, Any]:
        """The next step's `groups` parents, each with its ready-made prompt."""
        ...
