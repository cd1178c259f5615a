"""Release hints: a replica that published tells the others to look at the release store now.

Hints only make replicas faster; polling the release store every `storage.release_poll_s` is the guarantee, so a
lost hint (a replica restarting, a dropped connection) costs at most one poll interval.
- `PostgresReleaseHints`: `NOTIFY` on a channel named after the deployment (payload: the scenario), and a
  `LISTEN`ing connection read by a daemon thread.
- `NoHints`: nothing to send or hear (SQLite: one machine, polling alone).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class ReleaseHints:
    """Announce a scenario's new release; call `on_hint(scenario)` when another replica announces one."""

    def announce(self, scenario: str) -> None:
        """Tell the other replicas that `scenario`'s head moved (best effort: never raises)."""

    def listen(self, on_hint: Callable[[str], None]) -> None:
        """Start calling `on_hint(scenario)` (from another thread) for every announcement heard."""

    def close(self) -> None:
        """Stop listening."""


NoHints = ReleaseHints


def channel_name(deployment: str) -> str:
    """A NOTIFY channel per deployment (an identifier: letters, digits, underscores)."""
    return "reef_releases_" + hashlib.blake2b(deployment.encode(), digest_size=8).hexdigest()


class PostgresReleaseHints(ReleaseHints):
    """LISTEN/NOTIFY over psycopg 3 (`url`: a libpq URL)."""

    def __init__(self, url: str, deployment: str) -> None:
        self.url = url
        self.channel = channel_name(deployment)
        self._send: Any = None
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def announce(self, scenario: str) -> None:
        import psycopg

        with self._send_lock:
            try:
                if self._send is None or self._send.closed or self._send.broken:
                    self._send = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
                self._send.execute("SELECT pg_notify(%s, %s)", (self.channel, scenario))
            except psycopg.Error as exc:
                log.warning("release hint for %s not sent (%s); the others see it at their next poll", scenario, exc)

    def listen(self, on_hint: Callable[[str], None]) -> None:
        self._thread = threading.Thread(target=self._listen, args=(on_hint,), name="reef-release-hints", daemon=True)
        self._thread.start()

    def _listen(self, on_hint: Callable[[str], None]) -> None:
        import psycopg

        while not self._stopping.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    while not self._stopping.is_set():
                        for notify in conn.notifies(timeout=0.5):
                            on_hint(notify.payload)
            except psycopg.Error as exc:
                log.warning("release hints: listening failed (%s); retrying", exc)
                self._stopping.wait(1.0)
            except Exception:  # a bug in on_hint must not end the hints
                log.exception("release hints: handling a hint failed")
                time.sleep(0.1)

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._send_lock:
            if self._send is not None:
                self._send.close()
                self._send = None
