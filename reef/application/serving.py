"""What each scenario's requests are served with: the serving release's context (its harness prompt kept in
memory, the hot path) or the context of a release a request pins, read from the release's files.

A request may pin any release of the scenario's history or the working lineage's live tip (unlisted and never
served on its own, see `reef.learning.lineage`): sampling from the tip is how a client explores with the weights
the next step trains from (on-policy) while the gate has not yet published them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from reef.core.errors import NotFound
from reef.core.releases import Release
from reef.inference.base import Engine, RequestContext
from reef.learning.base import Recipe, ServingPrompt
from reef.releases.base import ReleaseStore

_MAX_PINNED_CONTEXTS = 4096


def release_dir(store: ReleaseStore, scenario: str, release_id: str | None) -> Path | None:
    """The content directory of a release of `scenario` (None for no release)."""
    if release_id is None:
        return None
    return store.materialize(store.get(scenario, release_id))


class ServingContexts:
    """The request contexts of every scenario; activating a release in the engine goes through here."""

    def __init__(self, recipe: Recipe, releases: ReleaseStore, engine: Engine, *, prepends_prompt: bool) -> None:
        self.recipe = recipe
        self.release_store = releases
        self.engine = engine
        # An agent whose gate runs it reads the tree from its own files: Reef prepends no harness prompt then.
        self.prepends_prompt = prepends_prompt
        self._prompts: dict[str, ServingPrompt] = {}  # scenario -> the serving release's chat harness
        self._pinned: dict[tuple[str, str], RequestContext] = {}
        self._tips: set[tuple[str, str]] = set()  # pinned lineage tips: checked again on every request

    def context_for(self, scenario: str, release_id: str | None) -> RequestContext:
        """The request context: the serving release, or a pinned one (NotFound if it is not the scenario's)."""
        if release_id is None or release_id == self.engine.active_release_id(scenario):
            prompt, turns = self._prompts.get(scenario, (None, ()))
            return RequestContext(scenario, release_id, system_prompt=prompt, example_turns=turns)
        key = (scenario, release_id)
        ctx = self._pinned.get(key)
        if ctx is not None and key in self._tips and self._tip(scenario, release_id) is None:
            del self._pinned[key]  # the tip was dropped or moved on: it serves no more
            self._tips.discard(key)
            ctx = None
        if ctx is None:
            ctx = self._pinned_context(scenario, release_id)
            if len(self._pinned) >= _MAX_PINNED_CONTEXTS:
                self._pinned.clear()
                self._tips.clear()
            self._pinned[key] = ctx
        return ctx

    def _pinned_context(self, scenario: str, release_id: str) -> RequestContext:
        try:
            release = self.release_store.get(scenario, release_id)
        except NotFound:
            tip = self._tip(scenario, release_id)
            if tip is None:
                raise
            release = tip
            self._tips.add((scenario, release_id))
        path = self.release_store.materialize(release)
        if self.recipe.surface == "harness":
            prompt, turns = self.recipe.serving_prompt(path) if self.prepends_prompt else (None, ())
            return RequestContext(scenario, release_id, system_prompt=prompt, example_turns=turns)
        # A release that is not the one loaded for the scenario is served like a candidate: from its files.
        candidate = path if self.recipe.surface == "weights" else None
        return RequestContext(scenario, release_id, candidate_path=candidate)

    def _tip(self, scenario: str, release_id: str) -> Release | None:
        """The live tip of `scenario`'s working lineage if it is `release_id` (read from the store each time)."""
        tip = self.release_store.lineage(scenario)
        return tip if tip is not None and tip.release_id == release_id else None

    async def activate(self, scenario: str, release: Release) -> None:
        """Serve `release` for `scenario`: its files loaded in the engine, its harness prompt kept in memory."""
        path = await asyncio.to_thread(self.release_store.materialize, release)
        if self.recipe.surface == "harness" and self.prepends_prompt:
            self._prompts[scenario] = await asyncio.to_thread(self.recipe.serving_prompt, path)
        await self.engine.activate(scenario, release, path)

    def forget(self, scenario: str) -> None:
        """`scenario` is served no more: drop its prompt and pinned contexts."""
        self._prompts.pop(scenario, None)
        self._pinned = {key: ctx for key, ctx in self._pinned.items() if key[0] != scenario}
        self._tips = {key for key in self._tips if key[0] != scenario}
