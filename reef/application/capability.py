"""The start-up refusal of a recipe its engine cannot feed (a recipe that would otherwise skip every report)."""

from __future__ import annotations

from reef.application.config import ConfigError
from reef.core.capabilities import ENGINE_SUPPLIES, Capability
from reef.core.settings import Settings
from reef.learning.recipes_registry import load_recipe

_WHY: dict[Capability, str] = {
    Capability.TOKEN_CAPTURE: "the token ids and log-probs of each served answer",
    Capability.SCORE_GIVEN_TOKENS: "log-probs of given tokens (evaluation.scoring 'likelihood')",
    Capability.SERVE_ADAPTER: "serving the adapters it trains",
}


def needed_capabilities(settings: Settings) -> frozenset[Capability]:
    """What the configured recipe, and the gate's scoring, need from the engine. The recipe is built from its
    configuration first, so a bad `learning.recipe_config` is refused (BadRequest naming its key) before this is."""
    needs = set(load_recipe(settings.learning.recipe, settings).surface.needs)
    if settings.evaluation.scoring == "likelihood":
        needs.add(Capability.SCORE_GIVEN_TOKENS)
    return frozenset(needs)


def check_engine_capability(settings: Settings) -> None:
    """Raise ConfigError naming `learning.recipe` and `inference.backend` when the engine cannot feed the recipe."""
    backend = settings.inference.resolved_backend()
    missing = sorted(needed_capabilities(settings) - ENGINE_SUPPLIES.get(backend, frozenset()))
    if not missing:
        return
    what = "; ".join(f"{c.value} ({_WHY[c]})" for c in missing)
    raise ConfigError(
        f"learning.recipe {settings.learning.recipe!r} cannot learn behind inference.backend {backend!r}: it needs "
        f"{what}, which that engine does not supply. Serve a local model (inference.backend local, vllm or "
        f"sglang) or choose a recipe that needs none (basic, or a harness recipe)"
    )
