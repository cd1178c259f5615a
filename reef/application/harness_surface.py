"""The harness surface the `/reef/harness` routes serve: a release's files rendered for an adapter, the scenario's
harness releases, the adapters, the installer script, and an agent's proposals queued for the next evolution step.

A pending release may hold model-written code nobody reviewed yet: the caller checks who may read it or propose
against it; nothing installs it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.application.release_history import ReleaseHistory
from reef.core.errors import BadRequest, Conflict, NotFound
from reef.core.identifiers import RELEASE_ID_PATTERN
from reef.core.releases import Release
from reef.core.settings import Settings
from reef.core.views import AdaptersView, HarnessView, Installer, JSONObject, ProposalQueued
from reef.harness.catalog import adapter_names, load_adapter
from reef.harness.install import install_script
from reef.harness.proposals import ProposalQueue
from reef.harness.published import check_proposal, harness_view
from reef.harness.render import render
from reef.harness.tree import load_tree
from reef.inference.base import Engine
from reef.learning.base import Recipe


class HarnessSurface:
    """Reads a scenario's harness releases and queues its proposals; the runtime builds one."""

    def __init__(
        self, settings: Settings, recipe: Recipe, history: ReleaseHistory, engine: Engine, notify: Callable[[str], None]
    ) -> None:
        self.settings = settings
        self.recipe = recipe
        self.history = history
        self.scenarios = history.scenarios
        self.engine = engine
        self._notify = notify
        self.proposals = ProposalQueue.for_settings(settings)

    def require_harness(self, scenario: str | None = None) -> None:
        """NotFound unless the recipe evolves a harness (and, given one, `scenario` is live)."""
        if not self.recipe.surface.files:
            raise NotFound(f"the recipe {self.recipe.name!r} does not evolve a harness")
        if scenario is not None and scenario not in self.scenarios.known:
            raise NotFound(f"unknown scenario {scenario!r}")

    def adapter(self, name: str | None = None) -> str:
        """The adapter `name` (None: `harness.default_adapter`); BadRequest naming `adapter` if there is none."""
        name = self.settings.harness.default_adapter if name is None else name
        load_adapter(name)
        return name

    async def release(self, scenario: str, release_id: str | None) -> Release:
        """The given (else the serving) release of a scenario with a harness; NotFound if there is none."""
        self.require_harness(scenario)
        return await self.history.release(scenario, release_id or None)

    async def view(self, release: Release, adapter: str) -> HarnessView:
        """The release's files rendered for `adapter`, with its stored tree and files."""
        directory = await self._materialize(release)
        return await asyncio.to_thread(harness_view, release, directory, adapter)

    async def releases(self, scenario: str, reviewer: bool) -> list[JSONObject]:
        """The scenario's harness releases, oldest first; pending ones only for the reviewer (an open rollout's
        candidate is served, so everyone sees it)."""
        if scenario not in self.scenarios.known:
            raise NotFound(f"unknown scenario {scenario!r}")
        releases = [row.to_json() for row in await asyncio.to_thread(self.history.releases, scenario)]
        if not reviewer:
            releases = [row for row in releases if not row["pending"] or row.get("canary")]
        return [{**row, "artifact_version": row["release_id"]} for row in reversed(releases)]

    def adapters(self) -> AdaptersView:
        """Every adapter shipped with Reef."""
        return {"adapters": [load_adapter(name).to_json() for name in adapter_names()]}

    async def installer(self, scenario: str, release: Release, adapter: str) -> Installer:
        """The installer of the release's harness for `adapter`; Conflict for a pending release (nothing installs
        one, the reviewer neither)."""
        chosen = load_adapter(adapter)
        if release.pending:
            raise Conflict(f"release {release.release_id} is pending review; promote it before installing it")
        directory = await self._materialize(release)
        files = await asyncio.to_thread(lambda: render(load_tree(directory), chosen))
        script = install_script(
            chosen,
            files,
            release_id=release.release_id,
            scenario=scenario,
            base_url=self.settings.reef.public_base_url(),  # configured, never a request's Host header
            model=self._served_model(),
        )
        return Installer(release.release_id, script)

    async def proposal_base(self, scenario: str, release_id: object) -> Release:
        """The release a proposal is checked against: the one it names, else the serving one; the scenario is
        created first when implicit creation is on."""
        self.require_harness()
        if scenario not in self.scenarios.known:
            if not self.settings.reef.implicit_scenarios:
                raise NotFound(f"unknown scenario {scenario!r} (implicit creation is off; POST /reef/scenarios first)")
            await self.scenarios.ensure(scenario)
        if release_id is not None and not (
            isinstance(release_id, str) and re.fullmatch(RELEASE_ID_PATTERN, release_id)
        ):
            raise BadRequest("must be a release id", field="release_id")
        return await self.history.release(scenario, release_id)

    async def propose(self, scenario: str, base: Release, body: dict[str, Any], reviewer: bool) -> ProposalQueued:
        """Check `{mutations, reason, session?, release_id?}` against `base` (a dry run) and queue it for the
        scenario's next evolution step. Proposed by someone other than the reviewer, it may touch only
        `harness.agent_proposal_kinds` nodes."""
        directory = await self._materialize(base)
        kinds = None if reviewer else self.settings.harness.agent_proposal_kinds
        mutations, reason = await asyncio.to_thread(check_proposal, body, directory, kinds)
        proposal = await asyncio.to_thread(self.proposals.append, scenario, mutations, reason, body.get("session"))
        self._notify(scenario)
        return {"proposal_id": proposal["proposal_id"], "scenario": scenario, "queued": True}

    async def _materialize(self, release: Release) -> Path:
        return await asyncio.to_thread(self.history.store.materialize, release)

    def _served_model(self) -> str:
        """The model name the installed harness asks for: the served name, the upstream's, else the engine's."""
        inference = self.settings.inference
        named = inference.served_model_name or inference.upstream_model
        if named:
            return named
        models = self.engine.models()
        return str(models[0]["id"]) if models else "reef"
