"""`reef serve` refuses a reachable port with no token, and warns when the agent tokens are admin."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import SecretStr

from reef.application.config import ConfigError
from reef.application.exposure import check_exposure, is_loopback, startup_warnings
from reef.core.settings import SandboxSettings, ServerSettings, Settings


def _settings(**server: object) -> Settings:
    return Settings(reef=ServerSettings(**server), sandbox=SandboxSettings(allow_unsandboxed=True))  # type: ignore[arg-type]


def test_loopback_hosts_are_recognised() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("example.org")


def test_a_reachable_host_without_a_token_is_refused_naming_reef_tokens() -> None:
    with pytest.raises(ConfigError, match=r"^reef\.tokens"):
        check_exposure(_settings(host="0.0.0.0"))
    check_exposure(_settings(host="0.0.0.0", allow_unauthenticated=True))
    check_exposure(_settings(host="0.0.0.0", tokens=[SecretStr("t")]))
    check_exposure(_settings(host="127.0.0.1"))


def test_agent_tokens_without_an_admin_token_are_admin_with_a_warning() -> None:
    warned = " ".join(startup_warnings(_settings(tokens=[SecretStr("t")])))
    assert "reef.admin_tokens" in warned
    scoped = " ".join(startup_warnings(_settings(tokens=[SecretStr("t")], admin_tokens=[SecretStr("a")])))
    assert "reef.admin_tokens" not in scoped and "sandbox:" in scoped


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_reef_serve_on_a_reachable_host_without_a_token_exits_2(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "serve", "--reef.host", "0.0.0.0", "--storage.dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "reef.tokens" in done.stderr
