"""Which arm of a rollout serves a request: sticky by session, else by user, else drawn per request.

The arm is a hash of the key and the rollout id, compared with the canary share: every replica computes the
same arm for a key with no coordination, a key keeps its arm for the whole rollout, and the next rollout
reshuffles (its id differs), so the same users are not always the ones exposed first.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Literal

Arm = Literal["candidate", "incumbent"]
ARMS: tuple[Arm, Arm] = ("candidate", "incumbent")
_SCALE = float(2**64)


def assignment_key(tags: Mapping[str, str]) -> str | None:
    """The request's sticky key: its `x-reef-tag-session`, else its `x-reef-tag-user`, else None (per request)."""
    for name in ("session", "user"):
        value = tags.get(name)
        if value:
            return f"{name}:{value}"
    return None


def position(key: str, rollout_id: str) -> float:
    """Where `key` falls in [0, 1) for `rollout_id` (uniform over keys; the same on every replica)."""
    digest = hashlib.blake2b(f"{rollout_id}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def arm_of(key: str | None, rollout_id: str, share: float) -> Arm:
    """The arm that serves `key` (None: a fresh draw for this request alone) in rollout `rollout_id`."""
    point = position(key, rollout_id) if key is not None else secrets.randbits(64) / _SCALE
    return "candidate" if point < share else "incumbent"
