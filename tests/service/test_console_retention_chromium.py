"""A candidate that forgets an earlier lesson, refused by the gate's retention guard: in `/reef/status`, in the commit
log and in the console (headless Chromium).

A real `reef serve` runs `ForgetfulTreeRecipe` (each demonstration becomes a worked example the chat agent is served)
in front of the fake provider's `recall` model (it answers a question from a worked example of the same question), so
a candidate that knows more really scores more, without a model. The gate's tasks are posted lesson by lesson through
the API. Lesson 1 is published; lesson 2's candidate learns its four facts but forgets two of lesson 1's: it wins on
the whole gate (a mean of 0.75 against 0.5), and the retention guard refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.chromium import CHROMIUM, CHROMIUM_MARKS, expect, playwright_api
from tests.fakes.reef_process import ReefProcess, wait_for_commits
from tests.fakes.upstream import FakeUpstream

pytestmark = CHROMIUM_MARKS

TOKEN = "retention-console-token"
S = "math"
AUTH = {"authorization": f"Bearer {TOKEN}"}
LESSONS = {
    1: {f"what is {n} + {n}?": str(2 * n) for n in range(1, 5)},
    2: {f"what is {n} times {n}?": str(n * n) for n in range(5, 9)},
}
FORGOTTEN = list(LESSONS[1])[:2]
RETENTION_ITEMS = 8


@pytest.fixture(scope="module")
def server(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    flags = [
        "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", "recall",
        "--learning.recipe", "tests.fakes.learning_recipe:ForgetfulTreeRecipe",
        "--learning.batch-size", "4",
        "--learning.poll-interval-s", "0.2",
        "--evaluation.retention-items", str(RETENTION_ITEMS),
        "--reef.tokens", f"[{TOKEN}]",
    ]  # fmt: skip
    with ReefProcess(tmp_path_factory.mktemp("retention-console"), *flags) as process:
        with httpx.Client(base_url=process.url, headers=AUTH, timeout=30) as client:
            assert client.post("/reef/scenarios", json={"name": S}).status_code == 201
            for lesson, facts in LESSONS.items():
                tasks = [{"prompt": q, "checker": "exact", "answer": a, "lesson": lesson} for q, a in facts.items()]
                assert client.post(f"/reef/scenarios/{S}/tasks", json={"tasks": tasks}).status_code == 201
                for n, (prompt, answer) in enumerate(facts.items()):
                    body: dict[str, Any] = {"feedback": {"prompt": prompt, "answer": answer}}
                    if lesson == 2 and n == 0:
                        body["metadata"] = {"forget": FORGOTTEN}
                    reported = client.post("/reef/report", json=body, headers={"x-reef-scenario": S})
                    assert reported.status_code == 200, reported.text
                wait_for_commits(client, S, lesson, timeout_s=60)
        yield process


@pytest.fixture()
def page() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        opened = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
        browser.close()
    assert not errors, f"the console threw: {errors}"


def test_a_candidate_that_forgets_an_earlier_lesson_is_refused_and_the_api_and_the_console_say_why(
    server: ReefProcess, page: Any, tmp_path: Path
) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        commits = client.get(f"/reef/scenarios/{S}/commits").json()["commits"]
        status = client.get("/reef/status").json()["scenarios"][S]
    assert [c["verdict"] for c in commits] == ["published", "rejected"], [c["reason"] for c in commits]
    first, refused = commits
    assert first["candidate_scores"] == [1.0] * 4 and first["current_scores"] == [0.0] * 4
    # On the whole gate the candidate wins (four new facts, two old ones lost); on lesson 1 it lost half.
    assert refused["candidate_scores"] == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert refused["current_scores"] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert "retention" in refused["reason"] and "refused" in refused["reason"]
    retention = refused["metrics"]["retention"]
    assert retention["refused"] is True and retention["tasks"] == 4 and retention["losses"] == 2
    assert retention["regression"] == 0.5 and retention["max_regression"] == 0.05
    assert refused["release_id"] is None and status["current_release_id"] == first["release_id"]
    assert status["last_commit"]["retention"]["refused"] is True
    assert status["gate"]["retention"] == {
        "items": 4, "earlier_items": 4, "retention_items": RETENTION_ITEMS, "max_regression": 0.05, "lessons": {"1": 4}
    }  # fmt: skip

    page.goto(f"{server.url}/console#/scenario/{S}")
    page.locator("#token-dialog[open]").wait_for()
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.locator("body[data-ready=scenario]").wait_for()
    expect(page.locator("dl.summary .retention")).to_have_text(
        f"retention set: 4 of 4 earlier items (at most {RETENTION_ITEMS}) over lessons 1: 4; refuses a loss over 0.05"
    )
    badge = page.locator(f"tr.commit[data-step='{refused['step']}'] span.badge.retention-refused")
    expect(badge).to_have_text("retention")
    assert badge.get_attribute("title") == "lost 0.500 on 4 items from earlier lessons (max_regression 0.05)"
    assert page.locator(f"tr.commit[data-step='{refused['step']}'][data-verdict=rejected]").count() == 1
    assert page.locator("span.badge.retention-refused").count() == 1  # the published step carries none
    page.screenshot(path=str(tmp_path / "retention.png"), full_page=True)
