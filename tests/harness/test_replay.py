"""The replay page: self-contained HTML of the release chain, each step's verdict, mutations, diff and scores."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from reef.harness.mutations import Mutation, apply_mutations
from reef.harness.replay import replay_html
from reef.harness.tree import HarnessTree, Node

BASE = HarnessTree.of([Node("rules", "rules", {"text": "Reply with only the answer."})])
EVOLVED = apply_mutations(BASE, [Mutation.create(Node("m1", "memory", {"text": "Q: 2 + 2\nA: 4"}))])


def release(release_id: str, parent: str | None, step: int, operation: str, current: bool = False) -> dict:
    return {"release_id": release_id, "parent_release_id": parent, "operation": operation, "step": step,
            "current": current, "pending": False, "metrics": {}}  # fmt: skip


def commit(step: int, verdict: str, release_id: str | None, parent: str, candidate, current, metrics) -> dict:
    return {"step": step, "verdict": verdict, "reason": f"{verdict} because", "release_id": release_id,
            "parent_release_id": parent, "candidate_scores": candidate, "current_scores": current,
            "metrics": metrics}  # fmt: skip


def page() -> str:
    rejected_mutation = {"op": "create", "node": {"id": "r9", "kind": "rules", "config": {"text": "<b>shout</b>"}}}
    return replay_html(
        "demo",
        [release("r0", None, 0, "creation"), release("r1", "r0", 2, "training", current=True)],
        [
            commit(
                1,
                "rejected",
                None,
                "r0",
                [0.0, 1.0],
                [0.0, 1.0],
                {"method": "evolve", "mutations": [rejected_mutation]},
            ),
            commit(2, "published", "r1", "r0", [1.0, 1.0], [0.0, 1.0], {"method": "evolve", "source": "fallback"}),
            commit(3, "skipped", None, "r1", [], [], {}),
        ],
        {"r0": BASE.to_json(), "r1": EVOLVED.to_json()},
    )


def test_the_replay_shows_every_step_with_its_verdict_mutations_and_scores():
    html = page()
    assert html.count("class='step ") == 3
    assert "data-verdict='rejected'" in html and "data-verdict='published'" in html and "data-verdict='skipped'" in html
    assert "+ memory m1" in html and "Q: 2 + 2" in html  # the published diff
    assert "&lt;b&gt;shout&lt;/b&gt;" in html and "<b>shout" not in html  # proposed text is escaped
    assert "<td>win</td>" in html and "(serving)" in html
    assert "<script" not in html and "http" not in html  # self-contained


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium (apt-get install chromium) is not installed")
@pytest.mark.e2e
def test_headless_chromium_renders_the_chain(tmp_path):
    path = tmp_path / "replay.html"
    path.write_text(page())
    common = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([*common, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-release="r1"' in dom and "Step 2" in dom
    shot = tmp_path / "replay.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1100,1400", path.as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    assert shot.exists() and shot.stat().st_size > 10_000
