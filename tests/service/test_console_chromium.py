"""The web console in headless Chromium, driving a real `reef serve` that has a history to show.

The server runs a harness-surface fake recipe (`FileRecipe`: each report adds its prompt and answer to the tree's
`answers.json`) in front of the fake provider, with gate tasks posted through the API and a scripted selector
choosing each step's verdict, so the scenario walks through skipped, published, kept, rejected and (after a
restart in review mode) pending steps without a model. Screenshots go to the test's tmp dir; with
`REEF_SAVE_SCREENSHOTS=1` the scenario page is also saved as `docs/console.png` for the documentation.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.chromium import CHROMIUM, CHROMIUM_MARKS, expect, playwright_api
from tests.fakes.reef_process import ReefProcess, wait_for_commits
from tests.fakes.scripted_selector import SCRIPT_FILE
from tests.fakes.upstream import FakeUpstream

pytestmark = CHROMIUM_MARKS

TOKEN = "console-token-for-tests"
SCENARIO = "support"
LONG_QUESTION = "Tell me about coral reefs and how they grow. " * 150  # longer than the console shows inline
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Served:
    server: ReefProcess
    inference_id: str
    first_report_id: str

    @property
    def url(self) -> str:
        return self.server.url

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)


def _flags(upstream: FakeUpstream, *extra: str) -> list[str]:
    return [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "fake-model",
        "--learning.recipe", "tests.fakes.learning_recipe:FileRecipe",
        "--learning.batch-size", "1",
        "--learning.poll-interval-s", "0.2",
        "--evaluation.policy", "tests.fakes.scripted_selector:ScriptedSelector",
        "--reef.tokens", f"[{TOKEN}]",
        *extra,
    ]  # fmt: skip


def _report(client: httpx.Client, prompt: str, answer: str, **extra: Any) -> str:
    body = {"feedback": {"prompt": prompt, "answer": answer}, **extra}
    response = client.post("/reef/report", json=body, headers={"x-reef-scenario": SCENARIO})
    assert response.status_code == 200, response.text
    return response.json()["agent_record_id"]


@pytest.fixture(scope="module")
def served(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    state = tmp_path_factory.mktemp("console")
    server = ReefProcess(state, *_flags(upstream)).start()
    try:
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            assert client.post("/reef/scenarios", json={"name": SCENARIO}).status_code == 201
            chat = {"model": "m", "messages": [{"role": "user", "content": LONG_QUESTION}]}
            answered = client.post("/v1/chat/completions", json=chat, headers={"x-reef-scenario": SCENARIO})
            inference_id = answered.headers["x-reef-agent-record-id"]
            first_report = _report(client, "capital of France?", "Paris", references=[inference_id], score=1.0)
            wait_for_commits(client, SCENARIO, 1, timeout_s=60)  # skipped: no gate tasks yet
            tasks = [
                {"prompt": "hello", "checker": "contains", "answer": "echo"},
                {"prompt": "2+2?", "checker": "exact", "answer": "4"},
            ]
            assert client.post(f"/reef/scenarios/{SCENARIO}/tasks", json={"tasks": tasks}).status_code == 201
            (state / SCRIPT_FILE).write_text("accept\naccept\ntie\nlose\n")
            wait_for_commits(client, SCENARIO, 2, timeout_s=60)  # the waiting report trains now: published
            for count, (prompt, answer) in enumerate(
                [("largest ocean?", "Pacific"), ("h2o?", "water"), ("sky?", "blue")], 3
            ):
                _report(client, prompt, answer)
                wait_for_commits(client, SCENARIO, count, timeout_s=60)
        server.stop()
        # In review mode an accepted candidate waits as a pending release.
        server = ReefProcess(state, *_flags(upstream, "--learning.review", "true"), port=server.port).start()
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            (state / SCRIPT_FILE).write_text("accept\n")
            _report(client, "fastest fish?", "sailfish")
            verdicts = [c["verdict"] for c in wait_for_commits(client, SCENARIO, 6, timeout_s=60)]
        assert verdicts == ["skipped", "published", "published", "kept", "rejected", "pending"]
        yield Served(server, inference_id, first_report)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"the console threw: {errors}"


def _sign_in(page: Any, url: str, fragment: str = "") -> None:
    page.goto(f"{url}/console{fragment}")
    page.locator("#token-dialog[open]").wait_for()
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")


def _screenshot(page: Any, tmp_path: Path, name: str, for_readme: bool = False) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    if for_readme and os.environ.get("REEF_SAVE_SCREENSHOTS"):
        (REPO / "docs").mkdir(exist_ok=True)
        shutil.copyfile(path, REPO / "docs" / "console.png")


def test_the_console_asks_for_the_token_again_when_refused_and_then_lists_the_scenarios(
    served: Served, page: Any, tmp_path: Path
) -> None:
    page.goto(served.url + "/console")
    page.locator("#token-dialog[open]").wait_for()
    assert page.inner_text("#token-message") == "This server needs a token."
    page.fill("#token-input", "not-the-token")
    page.click("#token-form button[type=submit]")
    expect(page.locator("#token-message")).to_contain_text("refused")
    assert page.locator("#token-dialog[open]").count() == 1
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    row = page.locator(f"table.overview tr[data-scenario={SCENARIO}]")
    row.wait_for()
    # The last hour's traffic: one inference, five reports (counted from the records route).
    expect(row.locator("td.reports")).not_to_have_text("…")
    assert row.locator("td.inferences").inner_text() == "1"
    assert row.locator("td.reports").inner_text() == "5"
    assert row.locator("td.ready").inner_text() == "0 / 1"
    assert "pending" in row.locator("td.last-verdict").inner_text()
    with served.api() as api:
        serving = api.get("/reef/status").json()["scenarios"][SCENARIO]["current_release_id"]
    assert row.locator("td.serving code").get_attribute("title") == serving
    assert page.evaluate("sessionStorage.getItem('reef.console.token')") == TOKEN
    assert TOKEN not in page.url and TOKEN not in page.content()
    _screenshot(page, tmp_path, "overview")


def test_the_scenario_page_draws_one_curve_point_per_commit_and_every_release(
    served: Served, page: Any, tmp_path: Path
) -> None:
    _sign_in(page, served.url, f"#/scenario/{SCENARIO}")
    page.locator("body[data-ready=scenario]").wait_for()
    with served.api() as api:
        commits = api.get(f"/reef/scenarios/{SCENARIO}/commits").json()["commits"]
        releases = api.get(f"/reef/scenarios/{SCENARIO}/releases").json()["releases"]
    points = page.eval_on_selector_all(
        "svg.curve g.point",
        """els => els.map(e => ({step: +e.dataset.step, verdict: e.dataset.verdict, candidate: e.dataset.candidate,
            serving: e.dataset.serving, title: e.querySelector('title').textContent,
            shape: e.querySelector('.marker').tagName}))""",
    )
    assert [(p["step"], p["verdict"]) for p in points] == [(c["step"], c["verdict"]) for c in commits]
    shapes = {p["verdict"]: p["shape"] for p in points}
    assert shapes == {"skipped": "rect", "published": "circle", "kept": "path", "rejected": "path", "pending": "path"}
    kept_marker = page.locator("g.point[data-verdict=kept] .marker").get_attribute("class")
    rejected_marker = page.locator("g.point[data-verdict=rejected] .marker").get_attribute("class")
    assert kept_marker != rejected_marker
    for point, commit in zip(points, commits, strict=True):
        if commit["candidate_scores"]:
            scores = commit["candidate_scores"]
            assert float(point["candidate"]) == pytest.approx(sum(scores) / len(scores))
            assert float(point["serving"]) == pytest.approx(
                sum(commit["current_scores"]) / len(commit["current_scores"])
            )
        else:
            assert point["candidate"] == "" and commit["verdict"] == "skipped"
        assert point["title"].startswith(f"step {commit['step']} · {commit['verdict']}")
        assert commit["reason"] in point["title"]
        if commit["release_id"]:
            assert f"release {commit['release_id']}" in point["title"]

    chain = page.eval_on_selector_all("ol.chain li.release", "els => els.map(e => e.dataset.releaseId)")
    assert chain == [r["release_id"] for r in releases]
    assert page.locator("li.release.current").get_attribute("data-release-id") == next(
        r["release_id"] for r in releases if r["current"]
    )
    assert page.locator("li.release.pending button.promote").count() == 1
    assert page.locator("table.commits tr.commit").count() == len(commits)

    # What the last published release changed: the answer its step added to answers.json.
    published = [c for c in commits if c["verdict"] == "published"][-1]
    item = page.locator(f"li.release[data-release-id='{published['release_id']}']")
    item.locator("details.changes summary").click()
    changed = item.locator(".diff-file[data-path='answers.json']")
    changed.wait_for()
    assert changed.get_attribute("data-status") == "changed"
    added = changed.locator(".diff-line.add").all_inner_texts()
    assert any('"largest ocean?": "Pacific"' in line for line in added), added
    assert item.locator(".diff-file[data-path='rules.md']").count() == 0  # unchanged files are not listed
    assert page.locator("div.live .job-state").inner_text() == "idle"
    _screenshot(page, tmp_path, "scenario", for_readme=True)


def test_rollback_and_promote_from_the_console_publish_new_releases_the_api_agrees_on(
    served: Served, page: Any, tmp_path: Path
) -> None:
    _sign_in(page, served.url, f"#/scenario/{SCENARIO}")
    page.locator("body[data-ready=scenario]").wait_for()
    with served.api() as api:
        before = api.get(f"/reef/scenarios/{SCENARIO}/releases").json()["releases"]
    earliest = before[-1]
    assert earliest["operation"] == "creation" and not earliest["current"]
    page.locator(f"li.release[data-release-id='{earliest['release_id']}'] button.rollback").click()
    page.locator("#confirm-dialog[open]").wait_for()
    assert earliest["release_id"] in page.inner_text("#confirm-message")
    page.click("#confirm-ok")
    page.locator("ol.chain li.release:first-child[data-operation=rollback].current").wait_for()
    with served.api() as api:
        after = api.get(f"/reef/scenarios/{SCENARIO}/releases").json()["releases"]
        status = api.get("/reef/status").json()["scenarios"][SCENARIO]
    assert len(after) == len(before) + 1
    assert after[0]["operation"] == "rollback" and after[0]["current"]
    assert after[0]["content_id"] == earliest["content_id"]
    assert page.locator("ol.chain li.release:first-child").get_attribute("data-release-id") == after[0]["release_id"]
    assert status["current_release_id"] == after[0]["release_id"]
    assert page.locator(".serving-release code").get_attribute("title") == after[0]["release_id"]

    # A cancelled confirmation does nothing.
    page.locator("li.release.pending button.promote").click()
    page.click("#confirm-cancel")
    with served.api() as api:
        assert len(api.get(f"/reef/scenarios/{SCENARIO}/releases").json()["releases"]) == len(after)
    page.locator("li.release.pending button.promote").click()
    page.click("#confirm-ok")
    page.locator("ol.chain li.release:first-child[data-operation=promote].current").wait_for()
    with served.api() as api:
        promoted = api.get(f"/reef/scenarios/{SCENARIO}/releases").json()["releases"][0]
    assert promoted["operation"] == "promote" and promoted["current"]
    _screenshot(page, tmp_path, "after-rollback-and-promote")


def test_training_controls_go_through_the_routes_and_a_refusal_shows_the_servers_message(
    served: Served, page: Any
) -> None:
    _sign_in(page, served.url, f"#/scenario/{SCENARIO}")
    page.locator("body[data-ready=scenario]").wait_for()
    with served.api() as api:
        refused = api.post("/reef/train", json={}, headers={"x-reef-scenario": SCENARIO})
    assert refused.status_code == 409  # the scenario trains in `auto` mode
    page.click("form.train button[type=submit]")
    notice = page.locator(".notice.error")
    notice.wait_for()
    assert notice.inner_text().startswith(f"409: {refused.json()['error']['message']}")

    page.select_option("select[name=training_mode]", "manual")
    expect(page.locator(".training-mode")).to_have_text(re.compile("^manual"))
    page.click("button.pause")
    expect(page.locator("button.pause")).to_have_text("Resume learning")
    with served.api() as api:
        contract = api.get(f"/reef/scenarios/{SCENARIO}/contract").json()
    assert contract["training_mode"] == "manual" and contract["paused"] is True
    page.click("button.pause")
    expect(page.locator("button.pause")).to_have_text("Pause learning")
    page.select_option("select[name=training_mode]", "auto")
    expect(page.locator(".training-mode")).to_have_text(re.compile("^auto"))
    with served.api() as api:
        contract = api.get(f"/reef/scenarios/{SCENARIO}/contract").json()
    assert contract["training_mode"] == "auto" and contract["paused"] is False


def test_the_records_browser_filters_and_opens_a_record_with_its_citations_and_raw_json(
    served: Served, page: Any, tmp_path: Path
) -> None:
    _sign_in(page, served.url, f"#/scenario/{SCENARIO}")
    page.locator("body[data-ready=scenario]").wait_for()
    page.locator("table.records tr.record-row").first.wait_for()
    assert page.locator("table.records tr.record-row").count() == 6
    page.select_option("select[name=request_type]", "report")
    expect(page.locator("tr.record-row[data-request-type=inference]")).to_have_count(0)
    assert page.locator("table.records tr.record-row").count() == 5
    page.select_option("select[name=request_type]", "inference")
    page.locator(f"tr.record-row[data-record-id={served.inference_id}]").wait_for()
    assert page.locator("table.records tr.record-row").count() == 1

    page.click(f"tr.record-row[data-record-id={served.inference_id}] a")
    page.locator("body[data-ready=record]").wait_for()
    with served.api() as api:
        record = api.get(f"/reef/scenarios/{SCENARIO}/records/{served.inference_id}").json()
    assert record["cited_by"] == [served.first_report_id]
    assert page.locator(".cited-by a").all_inner_texts() == [served.first_report_id]
    assert page.locator("tr.served-by a").inner_text() == record["release_id"]
    request_text = page.locator(".json-block[data-part=request] pre").inner_text()
    assert request_text.startswith("{") and request_text.endswith("…") and len(request_text) < len(LONG_QUESTION)
    with page.expect_popup() as popup_info:
        page.locator(".json-block[data-part=request] button.raw").click()
    popup = popup_info.value
    popup.wait_for_url(re.compile("^blob:"))  # it opens blank, then shows the JSON fetched with the token
    assert LONG_QUESTION.strip() in popup.inner_text("body")
    assert TOKEN not in popup.url
    _screenshot(page, tmp_path, "record")

    page.click(f".cited-by a:text('{served.first_report_id}')")
    page.wait_for_url(re.compile(f"#.*{served.first_report_id}$"))
    # The URL changes before the hashchange handler clears the previous record's `data-ready`, so wait for the
    # report's own content rather than for the marker.
    expect(page.locator(".references a")).to_have_text([served.inference_id])
    page.locator("body[data-ready=record]").wait_for()
