"""Guidance-TTT: the guide sees a summary and score, never the solution; malformed guidance is recognised."""

from __future__ import annotations

from pathlib import Path

from reef.discovery.guidance import GUIDE_RESPONSE_FORMAT, parse_guidance
from reef.recipes.guidance_ttt import GuidanceTTTRecipe
from tests.fakes.learning_world import started
from tests.recipes.test_tttd_learning import SCENARIO, _world


def test_guidance_is_the_block_that_ends_the_answer() -> None:
    assert parse_guidance("Think.\n<guidance>Grow the corner circles.</guidance>") == "Grow the corner circles."
    assert parse_guidance("<guidance>early</guidance> and then more text") is None
    assert parse_guidance("no block at all") is None
    assert parse_guidance("<guidance>  </guidance>") is None
    # What GUIDE_RESPONSE_FORMAT asks an engine for: the block as a JSON string.
    assert parse_guidance('"<guidance>Move circle 4 right.</guidance>"') == "Move circle 4 right."
    assert parse_guidance('"no block"') is None and parse_guidance("[1, 2]") is None


async def test_the_guide_sees_the_parents_score_but_not_its_solution(tmp_path: Path) -> None:
    world = await started(_world(tmp_path, GuidanceTTTRecipe), SCENARIO)
    step = await world.runtime.archive_next(SCENARIO, 2)
    parent = step["parents"][0]
    seed = "[[0.25,0.5,0.25],[0.75,0.5,0.25]]"
    assert step["mode"] == "guidance" and step["guide_response_format"] == GUIDE_RESPONSE_FORMAT
    assert seed not in parent["prompt"] and "0.5" in parent["prompt"] and "<guidance>" in parent["prompt"]
    assert seed in parent["executor_template"] and "{guidance}" in parent["executor_template"]
    await world.runtime.stop()
