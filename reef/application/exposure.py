"""What `reef serve` refuses or warns about before it listens: a reachable port with no token, agent tokens that
are admin because no admin token is set, and how untrusted code will run (the sandbox)."""

from __future__ import annotations

import ipaddress

from reef.application.config import ConfigError
from reef.core.settings import Settings
from reef.sandbox import describe_sandbox


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    """ConfigError naming `reef.tokens` when a non-loopback `reef.host` has no token and the operator did not set
    `reef.allow_unauthenticated`."""
    server = settings.reef
    if is_loopback(server.host) or server.all_tokens() or server.all_admin_tokens():
        return
    if server.allow_unauthenticated:
        return
    raise ConfigError(
        f"reef.tokens: reef.host {server.host!r} is reachable from other machines and no token is set; set "
        "reef.tokens (and reef.admin_tokens), or reef.allow_unauthenticated true to serve it open"
    )


def startup_warnings(settings: Settings) -> list[str]:
    """Lines `reef serve` logs as warnings at start (the sandbox line is always there)."""
    server = settings.reef
    lines = []
    if server.all_tokens() and not server.all_admin_tokens():
        lines.append(
            "no reef.admin_tokens set: the agent tokens (reef.tokens) are admin and reach every route, tasks, "
            "training control, rollback and export included; set reef.admin_tokens to scope them"
        )
    if not server.all_tokens() and not server.all_admin_tokens():
        lines.append("no token set: every route is open to whoever reaches the port")
    lines.append(describe_sandbox(settings.sandbox.allow_unsandboxed))
    return lines
