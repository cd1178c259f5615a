"""The model binding of an episode: where its agent sends its model requests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True, slots=True)
class ModelBinding:
    """Where an episode's agent sends its model requests: this Reef, a scenario, a model id, a token.

    With `mint` (the gate's bindings), the token is minted for each episode as it starts, `mint(episode_id, ttl_s)`,
    and replaces `api_key`; Reef tags that episode's records `reef-episode` with the id the token carries."""

    base_url: str
    scenario: str
    model: str
    api_key: str = "reef"
    max_tokens: int | None = None
    episode_id: str | None = None
    mint: Callable[[str, float], str] | None = None
