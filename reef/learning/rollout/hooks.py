"""What the learner's settlement asks of the rollouts (the application layer implements it)."""

from __future__ import annotations

from typing import Protocol

from reef.core.releases import Release


class RolloutHooks(Protocol):
    """A scenario's rollouts as a publishing step sees them."""

    def open_on(self, scenario: str) -> str | None:
        """The id of the scenario's open rollout (no other release publishes while one is), or None."""

    def canary(self, scenario: str) -> bool:
        """Whether a release the gate accepts opens a rollout (rollout mode `canary`) instead of serving at once."""

    async def begin(self, scenario: str, candidate: Release, incumbent: Release | None) -> str:
        """Open a rollout of `candidate` (stored, not serving) against `incumbent`; its id."""
