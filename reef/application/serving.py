"""What each scenario's requests are served with: the serving release's context (its harness prompt kept in
memory, the hot path) or the context of a release a request pins, read from the release's files.

A request may pin any release of the scenario's history or the working lineage's live tip (unlisted and never
served on its own, see `reef.learning.lineage`): sampling from the tip is how a client explores with the weights
the next step trains from (on-policy) while the gate has not yet published them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from reef.core.errors import NotFound
from reef.core.releases import Release
from reef.inference.base import Engine, RequestContext
from reef.learning.base import Recipe
from reef.learning.surface import ServingPrompt
from reef.releases.base import ReleaseStore

_MAX_PINNED_CONTEXTS = 4096
MISSING_PIN_TTL_S = 10.0  # how long a pin found in no release is answered 404 from memory (a publish forgets it)
# A pinned lineage tip is read again from the store for each request (it serves no more once it moved): by
# `prepare`, off the event loop; `context_for` trusts a read `prepare` made this recently.
TIP_FRESH_S = 1.0


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
        self._pending: set[tuple[str, str]] = set()  # pinned releases that are pending (a release never changes)
        self._tips: set[tuple[str, str]] = set()  # pinned lineage tips: checked again on every request
        self._tip_checked: dict[tuple[str, str], float] = {}  # when `prepare` last found each pinned tip still the tip
        self._missing: dict[tuple[str, str], float] = {}  # pins found in no release: until when to say so from memory

    def context_for(self, scenario: str, release_id: str | None) -> RequestContext:
        """The request context: the serving release, or a pinned one (NotFound if it is not the scenario's).

        A pin memory cannot answer is read from the release store here, in the caller's thread; the request path
        calls `prepare` first, which reads it off the event loop.
        """
        if release_id is None or release_id == self.engine.active_release_id(scenario):
            prompt, turns = self._prompts.get(scenario, (None, ()))
            return RequestContext(scenario, release_id, system_prompt=prompt, example_turns=turns)
        key = (scenario, release_id)
        self._raise_if_missing(key)
        ctx = self._pinned.get(key)
        if ctx is not None and self._tip_due(key) and not self._tip_still(key, self._tip(scenario, release_id), False):
            ctx = None
        if ctx is None:
            try:
                ctx, release, is_tip = self._pinned_context(scenario, release_id)
            except NotFound:
                self._note_missing(key)
                raise
            self._keep(key, ctx, release, is_tip)
        return ctx

    def pinned_pending(self, scenario: str, release_id: str) -> bool:
        """Whether a pin that `context_for` answered names a pending release (from memory; a lineage tip is not
        one)."""
        return (scenario, release_id) in self._pending

    async def prepare(self, scenario: str, release_id: str | None) -> None:
        """Read a pin from the release store off the event loop when memory cannot answer it, so that
        `context_for` then answers from memory: its context, or NotFound (remembered for `MISSING_PIN_TTL_S`, or
        until the scenario serves a new release)."""
        if release_id is None or release_id == self.engine.active_release_id(scenario):
            return
        key = (scenario, release_id)
        if self._missing.get(key, 0.0) > time.monotonic():
            return
        if key in self._pinned:
            if key not in self._tips:
                return
            if self._tip_still(key, await asyncio.to_thread(self._tip, scenario, release_id), True):
                return
        try:
            ctx, release, is_tip = await asyncio.to_thread(self._pinned_context, scenario, release_id)
        except NotFound:
            self._note_missing(key)
            return
        self._keep(key, ctx, release, is_tip)
        if is_tip:
            self._tip_checked[key] = time.monotonic()

    def _raise_if_missing(self, key: tuple[str, str]) -> None:
        until = self._missing.get(key)
        if until is not None:
            if until > time.monotonic():
                raise NotFound(f"scenario {key[0]!r} has no release {key[1]!r}")
            del self._missing[key]

    def _note_missing(self, key: tuple[str, str]) -> None:
        if len(self._missing) >= _MAX_PINNED_CONTEXTS:
            self._missing.clear()
        self._missing[key] = time.monotonic() + MISSING_PIN_TTL_S

    def _tip_due(self, key: tuple[str, str]) -> bool:
        """Whether `key` is a pinned lineage tip that `prepare` did not find still the tip just now."""
        return key in self._tips and time.monotonic() - self._tip_checked.get(key, -TIP_FRESH_S) >= TIP_FRESH_S

    def _tip_still(self, key: tuple[str, str], tip: Release | None, prepared: bool) -> bool:
        """Note what the store says of a pinned tip: True if it still is the tip, else its context is dropped."""
        if tip is not None:
            if prepared:
                self._tip_checked[key] = time.monotonic()
            return True
        self._pinned.pop(key, None)  # the tip was dropped or moved on: it serves no more
        self._pending.discard(key)
        self._tips.discard(key)
        self._tip_checked.pop(key, None)
        return False

    def _keep(self, key: tuple[str, str], ctx: RequestContext, release: Release, is_tip: bool) -> None:
        if len(self._pinned) >= _MAX_PINNED_CONTEXTS:
            self._pinned.clear()
            self._pending.clear()
            self._tips.clear()
            self._tip_checked.clear()
        self._pinned[key] = ctx
        if is_tip:
            self._tips.add(key)
        elif release.pending:
            self._pending.add(key)

    def _pinned_context(self, scenario: str, release_id: str) -> tuple[RequestContext, Release, bool]:
        """A pinned release's context read from the store, the release, and whether it is the lineage tip (no state
        changes, so it may run in a worker thread)."""
        is_tip = False
        try:
            release = self.release_store.get(scenario, release_id)
        except NotFound:
            tip = self._tip(scenario, release_id)
            if tip is None:
                raise
            release, is_tip = tip, True
        path = self.release_store.materialize(release)
        surface = self.recipe.surface
        if surface.files:
            prompt, turns = surface.prompt(self.recipe, path) if self.prepends_prompt else (None, ())
            return RequestContext(scenario, release_id, system_prompt=prompt, example_turns=turns), release, is_tip
        # A release that is not the one loaded for the scenario is served like a candidate: from its files.
        candidate = path if surface.weights else None
        return RequestContext(scenario, release_id, candidate_path=candidate), release, is_tip

    def _tip(self, scenario: str, release_id: str) -> Release | None:
        """The live tip of `scenario`'s working lineage if it is `release_id` (read from the store each time)."""
        tip = self.release_store.lineage(scenario)
        return tip if tip is not None and tip.release_id == release_id else None

    async def activate(self, scenario: str, release: Release) -> None:
        """Serve `release` for `scenario`: its files loaded in the engine, its harness prompt kept in memory."""
        path = await asyncio.to_thread(self.release_store.materialize, release)
        if self.recipe.surface.files and self.prepends_prompt:
            self._prompts[scenario] = await asyncio.to_thread(self.recipe.surface.prompt, self.recipe, path)
        await self.engine.activate(scenario, release, path)
        self._forget_missing(scenario)  # a pin that named no release may name this one

    def forget(self, scenario: str) -> None:
        """`scenario` is served no more: drop its prompt and pinned contexts."""
        self._prompts.pop(scenario, None)
        self._pinned = {key: ctx for key, ctx in self._pinned.items() if key[0] != scenario}
        self._tips = {key for key in self._tips if key[0] != scenario}
        self._pending = {key for key in self._pending if key[0] != scenario}
        self._tip_checked = {key: at for key, at in self._tip_checked.items() if key[0] != scenario}
        self._forget_missing(scenario)

    def _forget_missing(self, scenario: str) -> None:
        if any(key[0] == scenario for key in self._missing):
            self._missing = {key: until for key, until in self._missing.items() if key[0] != scenario}
