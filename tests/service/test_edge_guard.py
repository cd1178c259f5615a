"""A web browser cannot drive a server with no token: a Host the server does not know is a 421 (DNS rebinding),
a state-changing request from a page of another origin is a 403, and a body that is not JSON is a 415 (a
cross-site "simple" request). Nothing is stored for a refused request; the console's own calls still work."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from reef.core.settings import ServerSettings, Settings, StorageSettings
from reef.service.guard import RequestGuard, host_name, is_json_type
from tests.fakes.service_app import in_process_client

TASKS = {"tasks": [{"prompt": "Capital of France? One word.", "checker": "exact", "answer": "Paris"}]}
SAME_ORIGIN = "http://reef.test"  # the in-process client's base URL: the console's own origin


def _settings(tmp_path: Path, **server: Any) -> Settings:
    return Settings(reef=ServerSettings(**server), storage=StorageSettings(dir=tmp_path / "state"))


async def _client(tmp_path: Path, **server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async for http in in_process_client(_settings(tmp_path, **server), tmp_path):
        yield http


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(tmp_path):
        yield client


async def _scenarios(http: httpx.AsyncClient) -> list[str]:
    return [s["name"] for s in (await http.get("/reef/scenarios")).json()["scenarios"]]


# ---- Host ------------------------------------------------------------------------------------------------------


async def test_a_foreign_host_is_refused_naming_the_setting(http: httpx.AsyncClient):
    response = await http.get("/reef/status", headers={"host": "attacker.example:8900"})

    assert response.status_code == 421, response.text
    assert "reef.allowed_hosts" in response.json()["error"]["message"]


async def test_a_rebound_name_cannot_create_anything(http: httpx.AsyncClient):
    headers = {"host": "attacker.example:8900", "content-type": "application/json"}
    response = await http.post("/reef/scenarios/rebound/tasks", headers=headers, content=json.dumps(TASKS))

    assert response.status_code == 421
    assert "rebound" not in await _scenarios(http)


@pytest.mark.parametrize("host", ["localhost:8900", "127.0.0.1:8900", "[::1]:8900", "LOCALHOST", "reef.test"])
async def test_loopback_names_and_the_address_the_connection_reached_are_answered(http: httpx.AsyncClient, host):
    assert (await http.get("/reef/status", headers={"host": host})).status_code == 200


async def test_health_probes_are_answered_whatever_host_they_name(http: httpx.AsyncClient):
    assert (await http.get("/healthz", headers={"host": "balancer-probe.internal"})).status_code == 200


async def test_allowed_hosts_adds_names_and_a_star_allows_any(tmp_path: Path):
    async for http in _client(tmp_path / "a", allowed_hosts=["reef.example.org"]):
        assert (await http.get("/reef/status", headers={"host": "reef.example.org"})).status_code == 200
        assert (await http.get("/reef/status", headers={"host": "other.example.org"})).status_code == 421
    async for http in _client(tmp_path / "b", allowed_hosts="*"):
        assert (await http.get("/reef/status", headers={"host": "other.example.org"})).status_code == 200


async def test_the_public_urls_host_is_answered_and_its_pages_may_post(tmp_path: Path):
    async for http in _client(tmp_path, public_url="https://reef.example.org"):
        assert (await http.get("/reef/status", headers={"host": "reef.example.org"})).status_code == 200
        headers = {"host": "reef.example.org", "origin": "https://reef.example.org", "content-type": "application/json"}
        response = await http.post("/reef/scenarios/public/tasks", headers=headers, content=json.dumps(TASKS))
        assert response.status_code == 201, response.text
        assert (await http.get("/reef/status", headers={"host": "other.example.org"})).status_code == 421


async def test_reef_host_is_answered_unless_it_is_a_wildcard(tmp_path: Path):
    async for http in _client(tmp_path / "a", host="10.1.2.3", allow_unauthenticated=True):
        assert (await http.get("/reef/status", headers={"host": "10.1.2.3:8900"})).status_code == 200
    async for http in _client(tmp_path / "b", host="0.0.0.0", allow_unauthenticated=True):
        assert (await http.get("/reef/status", headers={"host": "0.0.0.0:8900"})).status_code == 421


async def test_a_server_with_a_token_checks_no_host(tmp_path: Path):
    async for http in _client(tmp_path, tokens=[SecretStr("t")]):
        headers = {"host": "reef.example.org", "authorization": "Bearer t"}
        assert (await http.get("/reef/status", headers=headers)).status_code == 200


# ---- Origin ----------------------------------------------------------------------------------------------------


async def test_a_post_from_a_foreign_origin_is_refused_and_stores_nothing(http: httpx.AsyncClient):
    headers = {"origin": "https://attacker.example", "content-type": "application/json"}
    response = await http.post("/reef/scenarios/crossed/tasks", headers=headers, content=json.dumps(TASKS))

    assert response.status_code == 403, response.text
    assert "reef.allowed_hosts" in response.json()["error"]["message"]
    assert "crossed" not in await _scenarios(http)


@pytest.mark.parametrize("origin", ["null", "http://localhost:3000", "http://reef.test:8080", "file://"])
async def test_an_opaque_origin_or_another_local_page_is_foreign_too(http: httpx.AsyncClient, origin):
    headers = {"origin": origin, "content-type": "application/json"}
    response = await http.post("/reef/scenarios", headers=headers, content=json.dumps({"name": "opaque"}))
    assert response.status_code == 403


async def test_the_consoles_own_calls_still_work(http: httpx.AsyncClient):
    # What reef/service/console/api.js sends: JSON with its content type, from the page's own origin.
    headers = {"origin": SAME_ORIGIN, "content-type": "application/json", "accept": "application/json"}
    created = await http.post("/reef/scenarios", headers=headers, content=json.dumps({"name": "console"}))
    assert created.status_code == 201, created.text
    tasks = await http.post("/reef/scenarios/console/tasks", headers=headers, content=json.dumps(TASKS))
    assert tasks.status_code == 201, tasks.text
    cleared = await http.delete("/reef/scenarios/console/tasks", headers={"origin": SAME_ORIGIN})
    assert cleared.status_code == 200, cleared.text
    assert (await http.get("/reef/status", headers={"origin": "https://attacker.example"})).status_code == 200


async def test_a_listed_host_may_post_from_its_pages(tmp_path: Path):
    async for http in _client(tmp_path, allowed_hosts=["reef.example.org"]):
        headers = {"origin": "https://reef.example.org", "content-type": "application/json"}
        response = await http.post("/reef/scenarios", headers=headers, content=json.dumps({"name": "proxied"}))
        assert response.status_code == 201, response.text


# ---- body types ------------------------------------------------------------------------------------------------


async def test_a_cross_site_text_plain_post_is_a_415_and_stores_nothing(http: httpx.AsyncClient):
    # A form or `fetch(…, {mode: "no-cors"})` from any page: text/plain needs no CORS preflight.
    headers = {"content-type": "text/plain;charset=UTF-8"}
    response = await http.post("/reef/scenarios/x/tasks", headers=headers, content=json.dumps(TASKS))

    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]["message"]
    assert "x" not in await _scenarios(http)


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=b", "text/plain"]
)
async def test_every_state_changing_route_takes_json_only(http: httpx.AsyncClient, content_type):
    headers = {"content-type": content_type, "x-reef-scenario": "forms"}
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    assert (await http.post("/v1/chat/completions", headers=headers, content=body)).status_code == 415
    assert (await http.post("/reef/report", headers=headers, content='{"score": 1}')).status_code == 415
    assert "forms" not in await _scenarios(http)


async def test_json_lines_and_unlabelled_bodies_from_programs_are_still_taken(http: httpx.AsyncClient):
    line = json.dumps(TASKS["tasks"][0]) + "\n"
    for content_type in ("application/x-ndjson", "application/jsonl"):
        response = await http.post("/reef/scenarios/lines/tasks", headers={"content-type": content_type}, content=line)
        assert response.status_code == 201, response.text
    bare = await http.post("/reef/scenarios/lines/tasks", content=line)  # no content type: a program's request
    assert bare.status_code == 201, bare.text
    empty = await http.post("/reef/scenarios/lines/tasks", headers={"content-type": "text/plain"})
    assert empty.status_code != 415  # no body: nothing to read


# ---- metrics ---------------------------------------------------------------------------------------------------


async def _metrics(http: httpx.AsyncClient) -> str:
    response = await http.get("/metrics")
    assert response.status_code == 200
    return response.text


def _routes(metrics: str) -> set[str]:
    return {line.split('route="', 1)[1].split('"', 1)[0] for line in metrics.splitlines() if 'route="' in line}


async def test_junk_paths_do_not_grow_the_metrics(http: httpx.AsyncClient):
    for n in range(3):  # every label that junk can reach exists once
        await http.get(f"/warmup/{n}/x")
        await http.post(f"/reef/warmup-{n}/x", json={})
        await http.get(f"/reef/scenarios/w{n}/records/not-a-record-{n}")
        await _metrics(http)
    before = await _metrics(http)

    for n in range(600):
        await http.get(f"/junk-{n}/{n}/{n}")
        await http.post(f"/reef/junk-{n}/x", json={})
        await http.get(f"/reef/scenarios/s{n}/records/not-a-record-{n}")

    after = await _metrics(http)
    assert _routes(after) == _routes(before)
    assert len(after) - len(before) < 4096, (len(before), len(after))


async def test_routes_are_labelled_by_template_and_strays_as_unmatched(http: httpx.AsyncClient):
    await http.post("/reef/scenarios/templated/tasks", json=TASKS)
    await http.get("/no/such/route")
    await http.get("/reef/status", headers={"host": "attacker.example"})

    routes = _routes(await _metrics(http))
    assert "/reef/scenarios/{scenario}/tasks" in routes and "unmatched" in routes
    assert not any("templated" in route or "no/such" in route for route in routes)


async def test_refusals_before_routing_are_counted_without_the_path(tmp_path: Path):
    async for http in _client(tmp_path, tokens=[SecretStr("t")]):
        for n in range(50):
            assert (await http.get(f"/reef/scenarios/s{n}/records")).status_code == 401
        metrics = (await http.get("/metrics", headers={"authorization": "Bearer t"})).text
        assert not any(route.startswith("/reef/scenarios/s") for route in _routes(metrics))
        assert 'route="unmatched",status="401"' in metrics


# ---- the guard's parts -----------------------------------------------------------------------------------------


def test_host_names_are_read_without_port_or_brackets():
    assert host_name("Example.ORG:8900") == "example.org"
    assert host_name("[::1]:8900") == "::1" and host_name("::1") == "::1" and host_name("localhost") == "localhost"


def test_json_content_types():
    for value in (b"application/json", b"Application/JSON; charset=utf-8", b"application/vnd.api+json"):
        assert is_json_type(value)
    for value in (b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data", b"", b"json"):
        assert not is_json_type(value)


def test_a_guard_with_tokens_checks_body_types_only():
    guard = RequestGuard.for_settings(ServerSettings(tokens=[SecretStr("t")]))
    scope = {
        "method": "POST",
        "path": "/reef/report",
        "headers": [(b"host", b"evil.example"), (b"origin", b"https://evil.example"), (b"content-length", b"2")],
    }
    assert guard.refusal(scope) is None
    scope["headers"].append((b"content-type", b"text/plain"))
    refusal = guard.refusal(scope)
    assert refusal is not None and refusal.status == 415
