"""The client side of the tutorial: ask, grade, report, wait for the learner's step, pull, replay."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import httpx

from reef.harness.replay import replay_html


def grade(answer: str, expected: str) -> float:
    """1 when the expected answer appears as a word in the reply, else 0."""
    return float(re.search(rf"(?<![\w]){re.escape(expected)}(?![\w])", answer) is not None)


def judged_steps(http: httpx.Client, scenario: str) -> list[dict]:
    """The scenario's learner steps that reached a verdict (none yet if the scenario does not exist)."""
    response = http.get(f"/reef/scenarios/{scenario}/commits")
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return [c for c in response.json()["commits"] if c["verdict"] in ("published", "rejected", "pending")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--wait-s", type=float, default=900.0)
    parser.add_argument("--adapter", default="pi", help="the agent whose files the serving tree is rendered for")
    args = parser.parse_args()
    http = httpx.Client(base_url=args.url, headers={"x-reef-scenario": args.scenario}, timeout=600)
    tasks = [json.loads(line) for line in args.tasks.read_text().splitlines() if line.strip()]
    steps_before = len(judged_steps(http, args.scenario))

    print(f"sending {len(tasks)} tasks to scenario {args.scenario}")
    for task in tasks:
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": task["prompt"]}],
            "max_tokens": 32,
            "temperature": 0,
        }
        response = http.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]["content"]
        score = grade(answer, task["answer"])
        report = {
            "score": score,
            "feedback": {"expected": task["answer"]},
            "references": [response.headers["x-reef-agent-record-id"]],
        }
        http.post("/reef/report", json=report).raise_for_status()
        print(f"  {score:.0f}  {task['prompt'][:50]!r} -> {answer.strip()[:60]!r}")

    print("waiting for the learner's step (grow, paired evaluation, verdict) ...")
    deadline = time.monotonic() + args.wait_s
    commits: list[dict] = []
    while time.monotonic() < deadline:
        commits = judged_steps(http, args.scenario)
        if len(commits) > steps_before:
            break
        time.sleep(3)
    else:
        raise SystemExit("no learner step finished in time; see work/serve-*.log")
    last = commits[-1]
    print(f"step {last['step']}: {last['verdict']} — {last['reason']}")
    print(f"  candidate scores {last['candidate_scores']}\n  serving scores   {last['current_scores']}")

    tree = http.get("/reef/harness", params={"adapter": args.adapter}).json()
    out = args.work / "tree" / args.scenario
    for relative, text in tree["files"].items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(text)
    print(f"serving release {tree['release_id'][:12]}: {args.adapter} files written under {out}")

    releases = http.get("/reef/harness/releases").json()["releases"]
    trees = {
        r["release_id"]: http.get("/reef/harness", params={"release_id": r["release_id"]}).json()["tree"]
        for r in releases
    }
    all_commits = http.get(f"/reef/scenarios/{args.scenario}/commits").json()["commits"]
    page = replay_html(args.scenario, releases, all_commits, trees)
    (args.work / "replay.html").write_text(page)
    (args.work / f"replay-{args.scenario}.html").write_text(page)
    print(f"replay written to {args.work / 'replay.html'}")


if __name__ == "__main__":
    main()
