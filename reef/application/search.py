"""What a searching recipe (`tttd`, `tttd-mean`) offers beyond a Recipe (`Extensions.search`): its archive and the
next step, read from a release directory (the archive rides in each release)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reef.core.errors import NotFound
from reef.learning.base import Recipe, Search
from reef.releases.base import ReleaseStore


async def serving_search(recipe: Recipe, releases: ReleaseStore, scenario: str) -> tuple[Search, Path]:
    """The recipe's search, and the serving release's directory (which holds the archive) of `scenario`."""
    search = recipe.extensions().search
    if search is None:
        raise NotFound(f"recipe {recipe.name!r} keeps no search archive (use tttd)")
    head = await asyncio.to_thread(releases.head, scenario)
    if head is None:
        raise NotFound(f"scenario {scenario!r} has no release")
    return search, await asyncio.to_thread(releases.materialize, head)
