"""A gate episode's token reaches only `/v1/*` of its own scenario, with or without configured tokens: the
loopback default (no token) included. Tokens are signed with the deployment's key in the state directory, expire,
and cannot outlive an episode."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from reef.core.episode_tokens import EpisodeKey, mint_episode_token
from reef.core.settings import HarnessSettings, ServerSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_client

AGENT, ADMIN = "agent-token-for-tests", "admin-token-for-tests"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
# What the sandboxed agent would go for if its model endpoint were the admin API.
ADMIN_CALLS = [
    ("GET", "/reef/scenarios/gated/records"),  # export the scenario's records
    ("GET", "/reef/scenarios/gated/tasks"),  # list the gate's tasks (and their checks)
    ("POST", "/reef/scenarios"),  # create a scenario
    ("GET", "/reef/scenarios"),
    ("POST", "/reef/report"),
    ("GET", "/reef/status"),
]


def _settings(tmp_path: Path, tokens: bool) -> Settings:
    server = ServerSettings(
        tokens=[SecretStr(AGENT)] if tokens else [],
        admin_tokens=[SecretStr(ADMIN)] if tokens else [],
        implicit_scenarios=True,
    )
    harness = HarnessSettings(episode_timeout_s=120)
    return Settings(reef=server, storage=StorageSettings(dir=tmp_path / "state"), harness=harness)


@pytest.fixture(params=[False, True], ids=["no-token-default", "tokens"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    settings = _settings(tmp_path, tokens=request.param)
    async for http in in_process_client(settings, tmp_path):
        yield http, settings


def _episode(settings: Settings, scenario: str = "gated", ttl_s: float = 60) -> str:
    return EpisodeKey.for_settings(settings).mint(scenario, "e1-t0-candidate", ttl_s)


def _as(token: str, scenario: str | None = "gated") -> dict[str, str]:
    headers = {"authorization": f"Bearer {token}"}
    if scenario is not None:
        headers["x-reef-scenario"] = scenario
    return headers


async def test_an_episode_reaches_the_model_of_its_scenario(served: tuple[httpx.AsyncClient, Settings]) -> None:
    http, settings = served
    answered = await http.post("/v1/chat/completions", json=BODY, headers=_as(_episode(settings)))
    assert answered.status_code == 200, answered.text


async def test_an_episode_calling_an_admin_route_is_refused(served: tuple[httpx.AsyncClient, Settings]) -> None:
    http, settings = served
    token = _episode(settings)
    for method, path in ADMIN_CALLS:
        refused = await http.request(method, path, headers=_as(token), json={"name": "planted"})
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.json()["error"]["type"] == "permission_error"


async def test_with_no_token_configured_requests_without_an_episode_token_stay_open(tmp_path: Path) -> None:
    async for http in in_process_client(_settings(tmp_path, tokens=False), tmp_path):
        assert (await http.get("/reef/scenarios")).status_code == 200
        assert (await http.get("/reef/scenarios", headers={"authorization": "Bearer reef"})).status_code == 200


async def test_an_episode_token_reaches_no_other_scenario(served: tuple[httpx.AsyncClient, Settings]) -> None:
    http, settings = served
    token = _episode(settings, scenario="gated")
    other = await http.post("/v1/chat/completions", json=BODY, headers=_as(token, "someone-else"))
    assert other.status_code == 403 and "'gated'" in other.json()["error"]["message"]
    unnamed = await http.post("/v1/chat/completions", json=BODY, headers=_as(token, None))
    assert unnamed.status_code == 403
    both = {**_as(token), "x-reef-scenario": "gated"}
    headers = list(both.items()) + [("x-reef-scenario", "someone-else")]
    assert (await http.post("/v1/chat/completions", json=BODY, headers=headers)).status_code == 403


async def test_an_expired_a_foreign_or_an_overlong_episode_token_is_a_401(
    served: tuple[httpx.AsyncClient, Settings],
) -> None:
    http, settings = served
    key = EpisodeKey.for_settings(settings)
    _episode(settings)  # the deployment's key exists
    assert key.path.is_file()
    own = key.path.read_bytes()
    expired = mint_episode_token(own, "gated", "e1", ttl_s=60, now_s=1_000_000)
    foreign = mint_episode_token(os.urandom(32), "gated", "e1", ttl_s=60)
    overlong = mint_episode_token(own, "gated", "e1", ttl_s=key.max_ttl_s + 3600)
    from_tokens = mint_episode_token(b"\0" * 32, "gated", "e1", ttl_s=60)
    for token in (expired, foreign, overlong, from_tokens, "reef-episode.garbage", "reef-episode."):
        refused = await http.post("/v1/chat/completions", json=BODY, headers=_as(token))
        assert refused.status_code == 401, (token, refused.text)


def test_minting_caps_the_lifetime_at_the_episodes_deadline(tmp_path: Path) -> None:
    settings = _settings(tmp_path, tokens=False)
    key = EpisodeKey.for_settings(settings)
    claims = key.verify(key.mint("gated", "e1", ttl_s=10 * 24 * 3600))
    assert claims is not None and claims.scenario == "gated" and claims.episode_id == "e1"
    assert claims.expires_at <= time.time() + settings.harness.episode_timeout_s + 60


def test_the_key_is_random_private_and_shared_by_whoever_shares_the_state_directory(tmp_path: Path) -> None:
    settings = _settings(tmp_path, tokens=True)
    first, second = EpisodeKey.for_settings(settings), EpisodeKey.for_settings(settings)
    assert second.verify(first.mint("gated", "e1", 60)) is not None  # another worker verifies it
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    elsewhere = EpisodeKey.for_settings(_settings(tmp_path / "other", tokens=True))
    assert elsewhere.verify(first.mint("gated", "e1", 60)) is None  # no key there yet: nothing was minted
    elsewhere.mint("gated", "e1", 60)
    assert elsewhere.verify(first.mint("gated", "e1", 60)) is None  # same configured tokens, another key
    assert first.path.read_bytes() != elsewhere.path.read_bytes()
    assert not [p for p in first.path.parent.iterdir() if p.name.startswith(".episode-key")]  # no temporary left
