"""The checks `reef serve` runs before it opens anything heavy, in one documented order.

1. settings — already validated by pydantic when they were loaded (`reef.application.config.load_settings`);
2. recipe configuration — `learning.recipe` names a recipe and `learning.recipe_config` fits its `config_model`;
3. installed extras — the optional packages the settings call for are importable;
4. engine capability — the engine can feed the recipe (token ids and log-probs for a weights recipe, …) and
   serve a release per request where `rollout.mode` is canary;
5. sandbox and auth — untrusted work can be isolated and the tokens the deployment needs are set.

Each check raises `ConfigError` naming the key at fault (the CLI exits 2 with it), so the first refusal is the real
cause: a recipe key is refused before an extra is looked for, an extra before an engine is asked what it can do.
No check loads a model or opens a store.
"""

from __future__ import annotations

from reef.application import capability
from reef.application.config import ConfigError
from reef.application.exposure import check_exposure
from reef.application.extras import check_extras
from reef.application.rollout import check_rollout
from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.recipe_config import parse_recipe_config
from reef.learning.recipes_registry import recipe_class


def check_startup(settings: Settings) -> None:
    """Run every startup check in order; the first that fails raises `ConfigError`."""
    check_recipe_config(settings)
    check_extras(settings)
    check_engine_capability(settings)
    check_sandbox_and_auth(settings)


def check_recipe_config(settings: Settings) -> None:
    """`learning.recipe` names a recipe class and `learning.recipe_config` validates against its `config_model`
    (an unknown or ill-typed key names `learning.recipe_config.<key>`); nothing is imported beyond the recipe."""
    try:
        parse_recipe_config(recipe_class(settings.learning.recipe).config_model, settings.learning.recipe_config)
    except BadRequest as exc:
        raise _refusal(exc) from None


def check_engine_capability(settings: Settings) -> None:
    """The configured engine can feed the recipe (a weights recipe behind an upstream that returns no token ids or
    log-probs is refused naming `learning.recipe` and `inference.backend`); the recipe is built from its settings
    here, so a refusal of its own (a judge it needs, a teacher it cannot use) names its `recipe_config` key."""
    try:
        capability.check_engine_capability(settings)
    except BadRequest as exc:
        raise _refusal(exc) from None
    check_rollout(settings, recipe_class(settings.learning.recipe))


def check_sandbox_and_auth(settings: Settings) -> None:
    """A deployment reachable from other machines has a token (else `reef.tokens` is named, unless
    `reef.allow_unauthenticated`). Whether untrusted work can be isolated is decided per run (`reef.sandbox.policy`):
    a step that cannot isolate fails closed with `sandbox: …` in status, and `reef serve` logs the sandbox it found."""
    check_exposure(settings)


def _refusal(exc: BadRequest) -> ConfigError:
    """A recipe's refusal as a configuration error naming the full key (its `recipe_config.*` is under learning)."""
    return ConfigError(f"learning.{exc.message}" if (exc.field or "").startswith("recipe_config") else exc.message)
