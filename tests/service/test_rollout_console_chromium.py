"""The console's rollout panel in headless Chromium, on a real `reef serve` in rollout mode canary: both arms'
live score and interval, the decision, and rolling back from the panel."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reef.learning.rollout.assignment import arm_of
from tests.fakes.chromium import CHROMIUM, CHROMIUM_MARKS, expect, playwright_api
from tests.fakes.reef_process import ReefProcess, wait_for_commits
from tests.fakes.scripted_selector import SCRIPT_FILE
from tests.fakes.upstream import FakeUpstream

pytestmark = CHROMIUM_MARKS

TOKEN = "rollout-console-token"
S = "support"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    state = tmp_path_factory.mktemp("rollout-console")
    flags = [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "tests.fakes.learning_recipe:FileRecipe",
        "--learning.batch-size", "1",
        "--learning.poll-interval-s", "0.2",
        "--evaluation.policy", "tests.fakes.scripted_selector:ScriptedSelector",
        "--rollout.mode", "canary",
        "--rollout.canary-share", "0.5",
        "--rollout.check-interval-s", "0.2",
        "--reef.tokens", f"[{TOKEN}]",
    ]  # fmt: skip
    with ReefProcess(state, *flags) as process:
        with httpx.Client(base_url=process.url, headers=AUTH, timeout=30) as client:
            assert client.post("/reef/scenarios", json={"name": S}).status_code == 201
            tasks = [{"prompt": "hello", "checker": "contains", "answer": "echo"}]
            assert client.post(f"/reef/scenarios/{S}/tasks", json={"tasks": tasks}).status_code == 201
            (state / SCRIPT_FILE).write_text("accept\n")
            body = {"feedback": {"prompt": "sky?", "answer": "blue"}}
            assert client.post("/reef/report", json=body, headers={"x-reef-scenario": S}).status_code == 200
            wait_for_commits(client, S, 1, timeout_s=60)
            view = client.get(f"/reef/scenarios/{S}/rollout").json()
            assert view["state"] == "canary"
            for n in itertools.islice(itertools.count(), 12):
                chat = {"model": "m", "messages": [{"role": "user", "content": f"question {n}"}]}
                headers = {"x-reef-scenario": S, "x-reef-tag-user": f"u{n}"}
                answered = client.post("/v1/chat/completions", json=chat, headers=headers)
                arm = arm_of(f"user:u{n}", view["rollout_id"], 0.5)
                expected = view["candidate_release_id"] if arm == "candidate" else view["incumbent_release_id"]
                assert answered.headers["x-reef-release-id"] == expected
                report = {"score": 0.0 if arm == "candidate" else 1.0}
                report["references"] = [answered.headers["x-reef-agent-record-id"]]
                report["feedback"] = {"prompt": f"question {n}", "answer": "x"}
                assert client.post("/reef/report", json=report, headers={"x-reef-scenario": S}).status_code == 200
        yield process


@pytest.fixture()
def page(tmp_path: Path) -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        opened = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
        browser.close()
    assert not errors, f"the console threw: {errors}"


def test_the_rollout_panel_shows_both_arms_and_rolls_back_on_request(server: ReefProcess, page: Any, tmp_path: Path):
    page.goto(f"{server.url}/console#/scenario/{S}")
    page.locator("#token-dialog[open]").wait_for()
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    panel = page.locator(".rollout[data-state=canary]")
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator("tr.arm-candidate")).to_be_visible()
    expect(panel.locator("tr.arm-incumbent .arm-mean")).not_to_have_text("—", timeout=30_000)
    expect(panel.locator(".interval-bar .interval").first).to_be_visible()
    page.screenshot(path=str(tmp_path / "rollout.png"), full_page=True)
    panel.locator("button.rollout-rollback").click()
    page.click("#confirm-ok")
    expect(page.locator(".rollout[data-state=rolled_back] .rollout-decision")).to_contain_text("rollback")
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        view = client.get(f"/reef/scenarios/{S}/rollout").json()
    assert view["state"] == "rolled_back" and view["decided_by"] == "operator"
