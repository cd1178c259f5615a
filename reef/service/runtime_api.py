"""What the HTTP edge calls on the application layer: the `RuntimeAPI` Protocol, owned by the service.

`reef.application.runtime.Runtime` implements it; the CLI passes one to `create_app` (mypy checks it there), and a
test may pass anything else that satisfies it. Routes reach it through `reef.service.state.runtime_of(request)`.
"""

from __future__ import annotations

from typing import Any, Protocol

from reef.core.releases import Release
from reef.inference.base import RequestContext
from reef.learning.base import Recipe
from reef.releases.base import ReleaseStore
from reef.storage.base import ScenarioInfo


class RuntimeAPI(Protocol):
    """The domain facade the routes call: scenarios, serving contexts, releases, the learner's control and state."""

    recipe: Recipe  # the deployment's recipe (its name, surface and report checks)
    release_store: ReleaseStore  # where releases are read and materialized

    async def start(self) -> None:
        """Serve each live scenario's head release, then start its learner."""

    async def stop(self) -> None:
        """Stop every learner and give up its locks."""

    def known_scenario(self, name: str) -> bool:
        """Whether `name` is a live scenario with a serving release (in memory; the hot path)."""

    async def ensure_scenario(self, name: str, release_id: str | None = None) -> tuple[ScenarioInfo, bool]:
        """Create the scenario if absent; `(info, created)`."""

    async def delete_scenario(self, name: str) -> None:
        """Archive the scenario's records and release refs and stop its learner; NotFound if unknown."""

    def context_for(self, scenario: str, release_id: str | None) -> RequestContext:
        """The request context: the serving release, or a pinned one (NotFound if it is not the scenario's)."""

    def route(self, scenario: str, release_id: str | None, tags: dict[str, str]) -> tuple[RequestContext, str | None]:
        """A request's context (a pinned release, an open rollout's arm, else the serving release) and the id of the
        rollout that chose it (None when none did)."""

    async def route_request(
        self, scenario: str, release_id: str | None, tags: dict[str, str]
    ) -> tuple[RequestContext, str | None]:
        """`route`, never blocking the event loop: a pinned release is looked up in a worker thread (and cached)."""

    def pinned_pending(self, scenario: str, release_id: str) -> bool:
        """Whether a pin a request was routed with names a pending release (from memory)."""

    async def request_failed(self, scenario: str, rollout_id: str, ctx: RequestContext) -> None:
        """A request a rollout routed failed (5xx, timeout): it counts against its arm."""

    def count_learner_usage(self, scenario: str, usage: dict[str, Any] | None) -> None:
        """Count what one of the learner's own requests that came over `/v1` spent upstream."""

    def rollout(self, scenario: str) -> dict[str, Any]:
        """The scenario's open or last rollout (`state` `none` when it never had one)."""

    def rollout_views(self) -> dict[str, dict[str, Any]]:
        """Every live scenario's open or last rollout, for the metrics."""

    async def end_rollout(self, scenario: str, action: str) -> dict[str, Any]:
        """Promote or roll back the scenario's open rollout now; Conflict when none is open."""

    def validate_report(self, scenario: str, report: dict[str, Any]) -> None:
        """Check a report's fields the recipe reads; BadRequest naming a malformed one (a report lacking what the
        recipe trains from passes)."""

    def notify(self, scenario: str) -> None:
        """Records of `scenario` were appended: wake its learner (never blocks)."""

    async def archive(self, scenario: str, limit: int) -> dict[str, Any]:
        """The search archive the serving release carries; BadRequest when the recipe does not search."""

    async def archive_next(self, scenario: str, groups: int) -> dict[str, Any]:
        """The next search step's `groups` parents and prompts."""

    def releases(self, scenario: str) -> list[dict[str, Any]]:
        """Every release of `scenario`, newest first, marking the serving one `current`."""

    async def rollback(self, scenario: str, release_id: str) -> Release:
        """Serve an earlier release again, as a new release."""

    async def promote(self, scenario: str, release_id: str) -> Release:
        """Serve a pending (reviewed) release, as a new release."""

    def commits(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The learner's step log of `scenario`, ascending from `after_step`."""

    def tasks(self, scenario: str) -> dict[str, Any]:
        """The API-given gate tasks of `scenario` and what its gate uses now."""

    async def add_tasks(self, scenario: str, body: bytes) -> dict[str, Any]:
        """Validate and store gate tasks given as a request body; nothing is stored on a bad one."""

    async def clear_tasks(self, scenario: str) -> dict[str, Any]:
        """Forget the API-given gate tasks of `scenario`."""

    async def update_control(
        self,
        scenario: str,
        training_mode: str | None = None,
        paused: bool | None = None,
        rollout_mode: str | None = None,
    ) -> dict[str, Any]:
        """Set the scenario's training mode, pause or resume its learning, and/or set its rollout mode."""

    async def request_step(
        self, scenario: str, text: str | None = None, release_id: str | None = None
    ) -> dict[str, Any]:
        """Queue a learner step of `scenario` now."""

    def contract(self, scenario: str) -> dict[str, Any]:
        """What a client needs to feed the scenario: recipe, report schema, training control and readiness."""

    def status(self) -> dict[str, Any]:
        """Per scenario: learner step, buffered units, job state, last verdict, serving release, errors."""
