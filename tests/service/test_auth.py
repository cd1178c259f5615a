"""With tokens configured, every route but /healthz needs one (Bearer or x-api-key)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def guarded(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    state = tmp_path_factory.mktemp("auth")
    flags = ("--inference.upstream-url", upstream.url, "--reef.tokens", f"[{TOKEN}, other-token]")
    with ReefProcess(state, *flags) as proc:
        yield proc


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.e2e
def test_a_request_without_a_token_is_a_401(guarded: ReefProcess) -> None:
    response = httpx.post(guarded.url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": "a"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert httpx.get(guarded.url + "/reef/status").status_code == 401


@pytest.mark.e2e
def test_a_wrong_token_is_a_401(guarded: ReefProcess) -> None:
    headers = {"x-reef-scenario": "a", "authorization": "Bearer nope"}
    assert httpx.post(guarded.url + "/v1/chat/completions", json=CHAT, headers=headers).status_code == 401


@pytest.mark.e2e
def test_bearer_and_x_api_key_are_both_accepted(guarded: ReefProcess) -> None:
    for headers in ({"authorization": f"Bearer {TOKEN}"}, {"x-api-key": "other-token"}):
        response = httpx.post(
            guarded.url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": "a", **headers}
        )
        assert response.status_code == 200, response.text


@pytest.mark.e2e
def test_health_needs_no_token_and_tokens_never_reach_the_log(guarded: ReefProcess) -> None:
    assert httpx.get(guarded.url + "/healthz").status_code == 200
    assert TOKEN not in guarded.output()


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_print_config_masks_secrets(tmp_path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reef.cli.main",
            "serve",
            "--print-config",
            "--reef.token",
            TOKEN,
            "--inference.upstream-api-key",
            "sk-upstream-secret",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert TOKEN not in out and "sk-upstream-secret" not in out
    assert "reef.token" in out and "flag" in out


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_a_bad_setting_exits_2_naming_the_key() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "serve", "--reef.port", "not-a-port"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "reef.port" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "serve", "--reef.colour", "blue"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "reef.colour" in result.stderr
