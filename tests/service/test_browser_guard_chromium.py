"""In headless Chromium, against a real `reef serve` with no token: the console's own calls work, a page of another
origin cannot make Reef store anything, and a name rebound to 127.0.0.1 gets no answer (DNS rebinding)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.chromium import CHROMIUM, CHROMIUM_MARKS, playwright_api
from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import start_fake_upstream

pytestmark = CHROMIUM_MARKS

REBOUND = "rebind.test"  # Chromium resolves it to 127.0.0.1, as an attacker's DNS would
TASKS = '{"tasks": [{"prompt": "Capital of France? One word.", "checker": "exact", "answer": "Paris"}]}'


class _ForeignPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another site</title><p>another site"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    upstream = start_fake_upstream()
    flags = ["--inference.upstream-url", upstream.url, "--inference.upstream-model", "fake-model"]
    process = ReefProcess(tmp_path_factory.mktemp("reef-guard"), *flags).start()
    try:
        yield process
    finally:
        process.stop()
        upstream.stop()


@pytest.fixture(scope="module")
def foreign_site() -> Iterator[str]:
    site = ThreadingHTTPServer(("127.0.0.1", 0), _ForeignPage)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{site.server_address[1]}/"
    site.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=[f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"]
        )
        yield launched
        launched.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    yield context.new_page()
    context.close()


def _scenarios(server: ReefProcess) -> list[str]:
    return [s["name"] for s in httpx.get(server.url + "/reef/scenarios", timeout=30).json()["scenarios"]]


def test_the_console_still_creates_through_its_own_api_module(server: ReefProcess, page: Any):
    page.goto(server.url + "/console")
    created = page.evaluate(
        """async () => {
            const { api } = await import("/console/api.js");
            return await api("/reef/scenarios", { method: "POST", body: { name: "from-console" } });
        }"""
    )
    assert created["created"] is True and "from-console" in _scenarios(server)


def test_a_page_of_another_origin_stores_nothing(server: ReefProcess, page: Any, foreign_site: str):
    page.goto(foreign_site)
    statuses = page.evaluate(
        """async ([reef, tasks]) => {
            const sent = [];
            // A "simple" request: text/plain, no preflight; the answer is opaque to the page.
            await fetch(`${reef}/reef/scenarios/plain/tasks`, { method: "POST", mode: "no-cors", body: tasks });
            // No content type at all (a Blob without one): the Origin gives it away.
            const blob = new Blob([tasks]);
            await fetch(`${reef}/reef/scenarios/blob/tasks`, { method: "POST", mode: "no-cors", body: blob });
            // JSON needs a preflight, which Reef never grants.
            try {
                const r = await fetch(`${reef}/reef/scenarios/json/tasks`, {
                    method: "POST", headers: { "content-type": "application/json" }, body: tasks,
                });
                sent.push(r.status);
            } catch (error) {
                sent.push("blocked");
            }
            return sent;
        }""",
        [server.url, TASKS],
    )
    assert statuses == ["blocked"]
    assert not {"plain", "blob", "json"} & set(_scenarios(server))


def test_a_name_rebound_to_loopback_gets_no_answer(server: ReefProcess, page: Any):
    response = page.goto(f"http://{REBOUND}:{server.port}/reef/status")
    assert response is not None and response.status == 421
    assert "reef.allowed_hosts" in page.content()


def test_the_api_page_renders_without_the_network(server: ReefProcess, page: Any, tmp_path: Path):
    external: list[str] = []
    page.on("request", lambda request: external.append(request.url) if "127.0.0.1" not in request.url else None)
    page.goto(server.url + "/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
    assert external == []
