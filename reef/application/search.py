"""What a searching recipe (`tttd`, `tttd-mean`) offers beyond a Recipe: its archive and the next step, read from a
release directory (the archive rides in each release)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from reef.core.errors import NotFound
from reef.learning.base import Recipe
from reef.releases.base import ReleaseStore


@runtime_checkable
class SearchRecipe(Protocol):
    """A recipe whose releases carry a search archive."""

    def archive_view(self, release_dir: Path, limit: int) -> dict[str, Any]:
        """The problem, the last step and the top `limit` entries of the archive in `release_dir`."""
        ...

    def next_step(self, release_dir: Path, groups: int) -> dict[str, Any]:
        """The next step's `groups` parents, each with its ready-made prompt."""
        ...


async def serving_search(recipe: Recipe, releases: ReleaseStore, scenario: str) -> tuple[SearchRecipe, Path]:
    """`recipe` as a search, and the serving release's directory (which holds the archive) of `scenario`."""
    if not isinstance(recipe, SearchRecipe):
        raise NotFound(f"recipe {recipe.name!r} keeps no search archive (use tttd)")
    head = await asyncio.to_thread(releases.head, scenario)
    if head is None:
        raise NotFound(f"scenario {scenario!r} has no release")
    return recipe, await asyncio.to_thread(releases.materialize, head)
