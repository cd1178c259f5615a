"""Short-lived tokens for gate episodes: they reach only `/v1/*`, and only until they expire.

A token is `reef-episode.<expiry unix seconds>.<HMAC-SHA256 of the expiry>`, keyed by a digest of the deployment's
configured tokens, so every worker and replica that shares the configuration verifies it without shared state,
and nothing but an expiry is stored in it. An agent in an episode holds this instead of a configured token: it can
ask the model, and nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

PREFIX = "reef-episode."


def _key(secrets: Sequence[str]) -> bytes:
    return hashlib.sha256(b"reef-episode-key\0" + b"\0".join(s.encode() for s in sorted(secrets))).digest()


def _mac(key: bytes, expiry: int) -> str:
    return hmac.new(key, str(expiry).encode(), hashlib.sha256).hexdigest()


def mint_episode_token(secrets: Sequence[str], ttl_s: float, now_s: float | None = None) -> str:
    """A token valid for `ttl_s` seconds, verifiable by anyone holding the same configured `secrets`."""
    expiry = int((time.time() if now_s is None else now_s) + ttl_s) + 1
    return f"{PREFIX}{expiry}.{_mac(_key(secrets), expiry)}"


def verify_episode_token(token: str, secrets: Sequence[str], now_s: float | None = None) -> bool:
    """Whether `token` was minted with `secrets` and has not expired (constant-time comparison)."""
    if not secrets or not token.startswith(PREFIX):
        return False
    expiry_text, _, mac = token[len(PREFIX) :].partition(".")
    if not expiry_text.isdigit():
        return False
    expiry = int(expiry_text)
    if expiry < (time.time() if now_s is None else now_s):
        return False
    return hmac.compare_digest(mac, _mac(_key(secrets), expiry))
