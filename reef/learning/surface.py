"""How a recipe's releases serve a request: the recipe's `surface`, an object that answers for it.

A recipe declares one (`Recipe.surface`): `NO_SURFACE` (its releases change nothing, so it does not learn),
`WEIGHTS` / `ON_POLICY_WEIGHTS` (a release is an adapter the engine loads), or `HARNESS` (a release is files: a
tree an agent pulls, or that `render` turns into a chat's system prompt and worked examples). Serving, the
gate, the canary and the startup checks ask it what they need instead of switching on its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reef.core.capabilities import Capability
from reef.core.settings import Settings

ServingPrompt = tuple[str | None, tuple[tuple[str, str], ...]]  # (system prompt, worked example turns)

CANARY_ENGINES = ("local", "vllm", "sglang")  # engines that serve any release of a scenario per request


@dataclasses.dataclass(frozen=True)
class Surface:
    """What a release of a recipe changes for a request, and what that asks of the deployment.

    `name` is what `/reef/status` and the contract show (`weights`, `harness`, `none`); `learns`: releases change
    something, so the recipe has a learner; `weights`: a release is weights the engine loads (growing one needs the
    `[train]` extra); `files`: a release is files an agent pulls or that `render` turns into what a chat is served;
    `needs`: what the serving engine must supply (`reef serve` refuses an engine that cannot).
    """

    name: str
    learns: bool = True
    weights: bool = False
    files: bool = False
    render: Callable[[Any, Path], ServingPrompt] | None = None  # (the recipe, a release's directory)
    needs: frozenset[Capability] = frozenset()

    def prompt(self, recipe: Any, release_dir: Path) -> ServingPrompt:
        """The system prompt and worked example turns a plain chat agent is served from `recipe`'s release in
        `release_dir` (nothing without `render`)."""
        return self.render(recipe, release_dir) if self.render is not None else (None, ())

    def canary_refusal(self, settings: Settings, recipe: str) -> str | None:
        """Why rollout mode `canary` cannot work for this surface under `settings`, or None."""
        if not self.learns:
            return f"recipe {recipe} publishes no trained releases to compare"
        backend = settings.inference.resolved_backend()
        if self.weights and backend not in CANARY_ENGINES:
            return (
                f"inference.backend {backend} serves one model whatever the release; "
                f"canary needs one that serves a release per request ({', '.join(CANARY_ENGINES)})"
            )
        if self.files and settings.harness.default_adapter != "chat":
            return (
                f"harness adapter {settings.harness.default_adapter} is pulled by the agent as files, so Reef cannot "
                "choose its release per request; canary needs the chat adapter"
            )
        return None


NO_SURFACE = Surface("none", learns=False)
# A trained adapter must serve, or publishing it changes nothing.
WEIGHTS = Surface("weights", weights=True, needs=frozenset({Capability.SERVE_ADAPTER}))
# A recipe that learns from its own served answers also needs their token ids and log-probs.
ON_POLICY_WEIGHTS = dataclasses.replace(WEIGHTS, needs=frozenset({Capability.SERVE_ADAPTER, Capability.TOKEN_CAPTURE}))
HARNESS = Surface("harness", files=True)
