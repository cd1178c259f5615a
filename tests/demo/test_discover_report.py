"""`reef discover --report` draws both best-so-far curves and the best packing as SVG circles."""

from __future__ import annotations

from pathlib import Path

from reef.cli.main import build_parser
from reef.demo.discover_report import write_discover_report
from reef.demo.discover_search import CONTROL_FOLD_S, CONTROL_MARGIN, SearchRun


def test_the_report_draws_both_curves_and_the_best_packing_as_circles(tmp_path: Path) -> None:
    result = {
        "problem": "circle-packing",
        "curve": [0.96, 0.97, 0.99],
        "control_curve": [0.96, 0.96, 0.97],
        "best_solution": "[[0.25,0.25,0.25],[0.75,0.75,0.25]]",
        "best": 0.99,
    }
    path = tmp_path / "discover.html"
    write_discover_report(path, result, None, None)
    page = path.read_text()
    assert page.count("<polyline") == 2 and page.count("<circle") == 2 and "0.99" in page


def test_reef_discover_takes_the_grid_the_recipe_and_a_control() -> None:
    args = build_parser().parse_args(["discover", "circle-packing", "--grid", "4x4", "--control", "--json"])
    assert (args.problem, args.grid, args.recipe, args.control, args.json) == (
        "circle-packing",
        "4x4",
        "tttd",
        True,
        True,
    )


def test_the_trained_search_keeps_in_reserve_what_the_control_needs_for_as_many_steps() -> None:
    run = SearchRun(recipe="tttd", trains=True, startup_s=20.0, steps=[{"ask_s": 8.0}, {"ask_s": 10.0}])
    # The control's server start, the two steps' asking, one more like the last, a fold per step, with the margin.
    expected = CONTROL_MARGIN * (20.0 + 8.0 + 10.0 + 10.0 + 3 * CONTROL_FOLD_S)
    assert run.control_estimate() == expected
    assert SearchRun(recipe="tttd", trains=True).control_estimate() == CONTROL_MARGIN * CONTROL_FOLD_S
