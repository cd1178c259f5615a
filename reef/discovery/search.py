"""The archive as a release file, and the next step a client should run.

A discovery scenario's every release carries `archive.json`; the base release's holds the evaluated seeds. The next
step is `archive.step + 1`: its G parents (PUCT) with the prompt each of their R attempts is asked with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reef.discovery.archive import Archive, Entry
from reef.discovery.evaluation import evaluate_attempt
from reef.discovery.problem import Problem
from reef.sandbox import Limits

ARCHIVE_FILE = "archive.json"


def seed_archive(
    problem: Problem, limits: Limits = Limits(), *, sandbox: bool | None = None, **settings: Any
) -> Archive:
    """A fresh archive of the problem's seeds, each evaluated in the sandbox (`sandbox` as `evaluate_attempt`)."""
    seeds = []
    for solution in problem.seeds:
        evaluation = evaluate_attempt(problem, solution, limits, sandbox=sandbox)
        seeds.append((solution, evaluation.score, evaluation.reward, evaluation.valid, evaluation.details))
    return Archive.seeded(seeds, **settings)


def read_archive(directory: Path) -> Archive | None:
    """The archive a release directory carries, or None when it has none."""
    path = directory / ARCHIVE_FILE
    return Archive.from_json(json.loads(path.read_text())) if path.is_file() else None


def write_archive(archive: Archive, directory: Path) -> None:
    """Write `archive` into a release directory (sorted keys: the same archive is the same bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ARCHIVE_FILE).write_text(json.dumps(archive.to_json(), sort_keys=True, indent=1))


def entry_view(entry: Entry) -> dict[str, Any]:
    """An entry as `GET /reef/scenarios/{s}/archive` shows it."""
    return {
        "entry_id": entry.entry_id,
        "score": entry.score,
        "reward": entry.reward,
        "valid": entry.valid,
        "parent_id": entry.parent_id,
        "step": entry.step,
        "visits": entry.visits,
        "solution": entry.solution,
        "details": entry.details,
    }


def next_step(archive: Archive, problem: Problem, groups: int) -> dict[str, Any]:
    """`{step, answer, response_format, parents: [{group, parent_id, score, solution, prompt, messages,
    response_format}]}`: what the client asks R times per group (with the parent's `response_format` in the chat
    body when it is not None: the step's, narrowed to the edits that change that parent where they can be listed);
    `answer` is `edit` when each answer is an edit the client applies to its parent's `solution` (`Problem.extract`)."""
    parents = []
    for group, entry in enumerate(archive.select(groups)):
        prompt = problem.prompt(entry.solution, entry.score, entry.details)
        parents.append(
            {
                "group": group,
                "parent_id": entry.entry_id,
                "score": entry.score,
                "solution": entry.solution,
                "prompt": prompt,
                "messages": [{"role": "user", "content": prompt}],
                "response_format": problem.response_format(entry.solution),
            }
        )
    step = archive.step + 1
    return {
        "problem": problem.name,
        "step": step,
        "answer": problem.answer,
        "response_format": problem.response_format(),
        "parents": parents,
    }
