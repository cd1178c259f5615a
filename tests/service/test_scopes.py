"""Every route answers each kind of token as its scope says: walked over the OpenAPI document, each route with no
token, an agent token, an admin token and a gate episode's token."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from reef.core.episode_tokens import EpisodeKey, mint_episode_token
from reef.core.settings import ServerSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_client

AGENT, ADMIN = "agent-token-for-tests", "admin-token-for-tests"
OPEN = {("GET", "/healthz"), ("GET", "/openapi.json")}
# What an agent token reaches besides /v1/*: reports, harness pull/install/proposals, the discovery archive, status
# and a scenario's contract.
AGENT_ROUTES = {
    ("POST", "/reef/report"),
    ("GET", "/reef/status"),
    ("GET", "/reef/harness"),
    ("GET", "/reef/harness/releases"),
    ("GET", "/reef/harness/versions"),
    ("GET", "/reef/harness/adapters"),
    ("GET", "/reef/harness/install"),
    ("POST", "/reef/harness/proposals"),
    ("GET", "/reef/scenarios/{scenario}/contract"),
    ("GET", "/reef/scenarios/{scenario}/archive"),
    ("GET", "/reef/scenarios/{scenario}/archive/next"),
}
UNDOCUMENTED = [("GET", "/metrics"), ("GET", "/console")]  # served, kept out of the API document


def _settings(tmp_path: Path, admin: bool) -> Settings:
    server = ServerSettings(
        tokens=[SecretStr(AGENT)], admin_tokens=[SecretStr(ADMIN)] if admin else [], implicit_scenarios=True
    )
    return Settings(reef=server, storage=StorageSettings(dir=tmp_path / "state"))


async def _client(tmp_path: Path, admin: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    settings = _settings(tmp_path, admin)
    async for http in in_process_client(settings, tmp_path):
        yield http


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(tmp_path):
        yield client


async def _operations(http: httpx.AsyncClient) -> list[tuple[str, str]]:
    document = (await http.get("/openapi.json")).json()
    methods = {"get", "post", "put", "patch", "delete"}
    found = [(m.upper(), path) for path, item in document["paths"].items() for m in item if m in methods]
    return sorted(found) + UNDOCUMENTED


async def _call(http: httpx.AsyncClient, method: str, template: str, token: str | None) -> httpx.Response:
    path = template.replace("{scenario}", "scoped").replace("{agent_record_id}", "r1").replace("{name}", "app.js")
    headers = {"x-reef-scenario": "scoped"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return await http.request(method, path, headers=headers, content=b"{}")


def _needs(method: str, path: str) -> str:
    if (method, path) in OPEN or path.startswith("/console"):
        return "open"
    if path.startswith("/v1/"):
        return "episode"
    return "agent" if (method, path) in AGENT_ROUTES else "admin"


async def test_every_route_answers_each_token_as_its_scope_says(http: httpx.AsyncClient, tmp_path: Path) -> None:
    episode = EpisodeKey.for_settings(_settings(tmp_path, admin=True)).mint("scoped", "e1", ttl_s=60)
    operations = await _operations(http)
    assert ("POST", "/reef/scenarios/{scenario}/tasks") in operations and len(operations) > 30
    for method, path in operations:
        needs = _needs(method, path)
        anonymous = await _call(http, method, path, None)
        agent = await _call(http, method, path, AGENT)
        admin = await _call(http, method, path, ADMIN)
        by_episode = await _call(http, method, path, episode)
        where = f"{method} {path}"
        assert (anonymous.status_code == 401) is (needs != "open"), where
        assert admin.status_code not in (401, 403), (where, admin.text)
        if needs == "admin":
            assert agent.status_code == 403, where
            assert agent.json()["error"]["type"] == "permission_error"
            assert "admin scope" in agent.json()["error"]["message"], where
        else:
            assert agent.status_code not in (401, 403), (where, agent.text)
        if needs in ("admin", "agent"):
            assert by_episode.status_code == 403, where
        else:
            assert by_episode.status_code not in (401, 403), (where, by_episode.text)


async def test_an_expired_or_foreign_episode_token_is_a_401(http: httpx.AsyncClient, tmp_path: Path) -> None:
    key = EpisodeKey.for_settings(_settings(tmp_path, admin=True))
    key.mint("scoped", "e1", ttl_s=60)
    expired = mint_episode_token(key.path.read_bytes(), "scoped", "e1", ttl_s=60, now_s=1_000_000)
    foreign = mint_episode_token(os.urandom(32), "scoped", "e1", ttl_s=60)
    for token in (expired, foreign):
        assert (await _call(http, "GET", "/v1/models", token)).status_code == 401


async def test_with_no_admin_token_the_agent_tokens_are_admin(tmp_path: Path) -> None:
    async for http in _client(tmp_path, admin=False):
        for method, path in [("GET", "/reef/scenarios"), ("GET", "/metrics"), ("DELETE", "/reef/scenarios/x")]:
            assert (await _call(http, method, path, AGENT)).status_code not in (401, 403), path
        assert (await _call(http, "GET", "/reef/scenarios", ADMIN)).status_code == 401  # not configured
