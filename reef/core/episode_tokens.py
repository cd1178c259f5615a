"""Short-lived tokens for gate episodes: each names its scenario and episode, reaches only that scenario's `/v1/*`,
and expires with its episode.

A token is `reef-episode.<claims>.<HMAC-SHA256 of the claims>`, the claims being base64url JSON of the scenario,
the episode id, when it was issued and when it expires. The key is 32 random bytes in `<storage.dir>/episode-key`
(mode 0600), created by the first process that mints a token and read by every worker and replica that shares the
state directory: it owes nothing to the configured tokens, so knowing an agent or admin token does not let anyone
mint an episode token, and an episode token says nothing about them. The server refuses a token whose lifetime is
longer than an episode may run (`harness.episode_timeout_s` plus `EPISODE_TOKEN_MARGIN_S`), whatever its MAC.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reef.core.settings import Settings

PREFIX = "reef-episode."
KEY_FILE = "episode-key"
KEY_BYTES = 32
EPISODE_TOKEN_MARGIN_S = 10.0  # a token outlives its episode's timeout by this much (the agent's start-up)
CLOCK_SKEW_S = 60  # how far in the future a token's issue time may lie (clocks of replicas differ a little)
MAX_TOKEN_CHARS = 2048


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeClaims:
    """What a valid episode token says: the scenario it may call, the episode it belongs to, when it expires."""

    scenario: str
    episode_id: str
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _mac(key: bytes, claims: str) -> str:
    return hmac.new(key, b"reef-episode\0" + claims.encode("ascii"), hashlib.sha256).hexdigest()


def mint_episode_token(key: bytes, scenario: str, episode_id: str, ttl_s: float, now_s: float | None = None) -> str:
    """A token for `episode_id` of `scenario`, valid for `ttl_s` seconds from `now_s`, signed with `key`."""
    now = time.time() if now_s is None else now_s
    issued = int(now)
    claims = {"s": scenario, "e": episode_id, "i": issued, "x": int(now + ttl_s) + 1}
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{PREFIX}{body}.{_mac(key, body)}"


def verify_episode_token(token: str, key: bytes, max_ttl_s: float, now_s: float | None = None) -> EpisodeClaims | None:
    """The token's claims when `key` signed it, it has not expired and its lifetime is at most `max_ttl_s`;
    None otherwise (the MAC is compared in constant time)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    body, dot, mac = token[len(PREFIX) :].partition(".")
    if not dot or not body.isascii():
        return None
    if not hmac.compare_digest(mac.encode("utf-8"), _mac(key, body).encode("ascii")):
        return None
    try:
        claims: Any = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(claims, dict):
        return None
    scenario, episode_id, issued, expiry = (claims.get(k) for k in ("s", "e", "i", "x"))
    if not (isinstance(scenario, str) and isinstance(episode_id, str)):
        return None
    if not (type(issued) is int and type(expiry) is int):
        return None
    now = time.time() if now_s is None else now_s
    if expiry < now or issued > now + CLOCK_SKEW_S or expiry - issued > max_ttl_s + 1:
        return None
    return EpisodeClaims(scenario, episode_id, expiry)


def looks_like_episode_token(credential: bytes) -> bool:
    """Whether a presented credential claims to be an episode token (then it must verify, or the request fails)."""
    return credential.startswith(PREFIX.encode())


class EpisodeKey:
    """The deployment's episode-token key, a file in the state directory: read when a token is verified (re-read
    when the file changes), created when the first token is minted.

    `max_ttl_s` is the longest an episode token may live: `mint` caps its ttl there and `verify` refuses a longer
    lifetime."""

    def __init__(self, path: Path, max_ttl_s: float) -> None:
        self.path = path
        self.max_ttl_s = max_ttl_s
        self._seen: tuple[int, int, int] | None = None
        self._key: bytes | None = None

    @classmethod
    def for_settings(cls, settings: Settings) -> EpisodeKey:
        """`<storage.dir>/episode-key`, tokens living at most `harness.episode_timeout_s` plus the margin."""
        path = Path(settings.storage.dir).expanduser() / KEY_FILE
        return cls(path, settings.harness.episode_timeout_s + EPISODE_TOKEN_MARGIN_S)

    def mint(self, scenario: str, episode_id: str, ttl_s: float) -> str:
        """A token for one episode of `scenario`, valid for `ttl_s` seconds (at most `max_ttl_s`) from now."""
        key = self._read() or self._create()
        return mint_episode_token(key, scenario, episode_id, min(ttl_s, self.max_ttl_s))

    def verify(self, token: str) -> EpisodeClaims | None:
        """The token's claims, or None when it is not valid (or no key exists yet: then no token was minted)."""
        try:
            key = self._read()
        except (OSError, ValueError):  # unreadable or not a key: nothing verifies until it is fixed
            return None
        return None if key is None else verify_episode_token(token, key, self.max_ttl_s)

    def _read(self) -> bytes | None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            key = self.path.read_bytes()
            if len(key) != KEY_BYTES:
                raise ValueError(f"{self.path} is not an episode key ({KEY_BYTES} bytes); remove it to make a new one")
            self._key, self._seen = key, seen
        return self._key

    def _create(self) -> bytes:
        """Write a fresh key under a temporary name (0600, O_EXCL) and link it into place: a process that loses the
        race to another one reads the winner's key, and nobody ever reads a half-written file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(6)}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(secrets.token_bytes(KEY_BYTES))
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temporary, self.path)
            except FileExistsError:
                pass  # another worker made it first: use that one
        finally:
            temporary.unlink(missing_ok=True)
        key = self._read()
        if key is None:
            raise FileNotFoundError(f"the episode key {self.path} vanished as it was made")
        return key
