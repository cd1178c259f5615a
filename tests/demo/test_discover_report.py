"""`reef discover`: the report draws every arm's best-so-far curve and the best packing as SVG circles; the random
arm's plumbing; means over seeds."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from reef.cli.main import build_parser
from reef.demo import discover_search
from reef.demo.discover import problem_option, seed_means
from reef.demo.discover_report import write_discover_report
from reef.demo.discover_search import CONTROL_FOLD_S, CONTROL_MARGIN, SearchRun
from reef.discovery.evaluation import Evaluation
from reef.discovery.problem import load_problem
from reef.sandbox import Limits


def test_the_report_draws_every_arms_curve_and_the_best_packing_as_circles(tmp_path: Path) -> None:
    result = {
        "problem": "circle-packing",
        "curves": {"trained": [0.96, 0.97, 0.99], "frozen": [0.96, 0.96, 0.97], "random": [0.96, 0.98, 0.98]},
        "best_solution": "[[0.25,0.25,0.25],[0.75,0.75,0.25]]",
        "best": 0.99,
    }
    path = tmp_path / "discover.html"
    write_discover_report(path, result)
    page = path.read_text()
    assert page.count("<polyline") == 3 and page.count("<circle") == 2 and "0.99" in page


def test_reef_discover_takes_the_grid_the_recipe_and_a_control() -> None:
    args = build_parser().parse_args(["discover", "circle-packing", "--grid", "4x4", "--control", "--json"])
    assert (args.problem, args.grid, args.recipe, args.control, args.json) == (
        "circle-packing",
        "4x4",
        "tttd",
        True,
        True,
    )


def test_an_option_value_is_json_where_it_parses_and_text_otherwise() -> None:
    assert problem_option("n=6") == ("n", 6)
    assert problem_option("answer=list") == ("answer", "list")  # as the discovery guide writes it
    assert problem_option("moves=fine") == ("moves", "fine")
    assert problem_option("weights=[1, 2]") == ("weights", [1, 2])
    assert problem_option('name="6"') == ("name", "6")
    for bad in ("n", "=6"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            problem_option(bad)


def test_the_trained_search_keeps_in_reserve_what_the_control_needs_for_as_many_steps() -> None:
    run = SearchRun(recipe="tttd", trains=True, startup_s=20.0, steps=[{"ask_s": 8.0}, {"ask_s": 10.0}])
    # The control's server start, the two steps' asking, one more like the last, a fold per step, with the margin.
    expected = CONTROL_MARGIN * (20.0 + 8.0 + 10.0 + 10.0 + 3 * CONTROL_FOLD_S)
    assert run.control_estimate() == expected
    assert SearchRun(recipe="tttd", trains=True).control_estimate() == CONTROL_MARGIN * CONTROL_FOLD_S


class FakeSearchClient:
    """The archive routes of a scenario whose archive always holds the seed and folds each step in at once."""

    scenario = "discover"

    def __init__(self, seed_solution: str) -> None:
        self.seed_solution = seed_solution
        self.step = 0
        self.asked: list[dict[str, Any]] = []
        self.reports: list[dict[str, Any]] = []

    async def create(self) -> None:
        return None

    async def archive(self, limit: int = 1) -> dict[str, Any]:
        return {"step": self.step, "entries": [{"score": 0.9, "solution": self.seed_solution}]}

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        self.step += 1
        parent = {"group": 0, "parent_id": "p0", "solution": self.seed_solution, "messages": [], "response_format": {}}
        return {"step": self.step, "rollouts": 4, "parents": [parent]}

    async def ask(self, messages: Any, temperature: float, max_tokens: int, release_id: Any = None,
                  response_format: Any = None) -> tuple[str, str]:  # fmt: skip
        self.asked.append({"max_tokens": max_tokens, "response_format": response_format})
        return '{"circle": 0, "change": "grow"}', f"rec-{len(self.asked)}"

    async def report(self, score: float, receipt: str, metadata: dict[str, Any]) -> None:
        self.reports.append({"receipt": receipt, **metadata})


def test_the_random_policy_draws_each_attempt_from_the_parents_edit_menu(monkeypatch) -> None:
    problem = load_problem("circle-packing", {"n": 6})
    client = FakeSearchClient(problem.seeds[0])
    monkeypatch.setattr(
        discover_search, "evaluate_attempt", lambda p, s, limits: Evaluation(0.5, s is not None, "", 0.5)
    )
    run = SearchRun(recipe="tttd", trains=False, policy="random")
    asyncio.run(
        discover_search.run_search(
            client, problem, run, groups=1, steps=2, deadline=time.monotonic() + 600, temperature=1.0,
            max_tokens=120, limits=Limits(), on_step=lambda entry: None, seed=7,
        )
    )  # fmt: skip
    menu = [json.dumps(edit) for edit in problem.useful_edits(problem.seeds[0]) or []]
    chosen = [r["solution"] for r in client.reports]
    assert len(run.steps) == 2 and len(client.reports) == 8
    assert all(a == {"max_tokens": 1, "response_format": None} for a in client.asked)  # a receipt, not an answer
    assert all(s is not None for s in chosen)  # every draw was an applicable edit of the parent
    assert len({s for s in chosen}) > 1 and len(menu) > 1
    assert len(run.curve) == 3


def test_means_over_seeds_carry_every_arm_and_each_seeds_result() -> None:
    results = [
        {"problem": "circle-packing", "seed": s, "seed_best": 0.9, "best": 1.0 + s / 100, "control_best": 1.0,
         "random_best": 1.01}
        for s in range(3)
    ]  # fmt: skip
    means = seed_means(results, [0, 1, 2])
    assert means["best"] == pytest.approx(1.01) and means["random_best"] == pytest.approx(1.01)
    assert means["best_ci95"][0] < 1.01 < means["best_ci95"][1] and means["seeds"] == results
