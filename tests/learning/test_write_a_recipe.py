"""The worked example of docs/developer/write-a-recipe.md runs: configured, stepped through the learner, published."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.recipes_registry import load_recipe
from tests.examples.answer_book import AnswerBook, AnswerBookConfig, read_book
from tests.fakes.learning_world import QUESTIONS, make_settings, open_world, started

ROOT = Path(__file__).resolve().parents[2]
DOTTED = "tests.examples.answer_book:AnswerBook"


def configured(root: Path, **recipe_config: object) -> Settings:
    settings = make_settings(root)
    learning = settings.learning.model_copy(update={"recipe": DOTTED, "recipe_config": recipe_config})
    return settings.model_copy(update={"learning": learning})


def test_the_page_shows_the_example_module_as_it_is() -> None:
    page = (ROOT / "docs" / "developer" / "write-a-recipe.md").read_text()
    shown = re.search(r"```python\n(\"\"\"`answer_book`.*?)```", page, re.S)
    assert shown is not None
    assert shown.group(1) == (ROOT / "tests" / "examples" / "answer_book.py").read_text()


def test_the_example_is_loaded_by_its_dotted_name_with_its_typed_config(tmp_path) -> None:
    recipe = load_recipe(DOTTED, configured(tmp_path, max_answers=3))
    assert isinstance(recipe, AnswerBook) and recipe.recipe_config == AnswerBookConfig(max_answers=3)
    with pytest.raises(BadRequest) as error:
        load_recipe(DOTTED, configured(tmp_path, max_answer=3))
    assert error.value.field == "recipe_config.max_answer"


async def test_a_step_of_the_example_recipe_publishes_a_book_that_serves_better(tmp_path) -> None:
    world = await started(open_world(tmp_path, configured(tmp_path, max_answers=10), AnswerBook))
    taught = dict(list(QUESTIONS.items())[:2])
    for question, answer in taught.items():
        world.report("math", question, answer)

    commit = await world.runtime.step("math")

    assert commit["verdict"] == "published" and commit["metrics"]["new_answers"] == 2
    head = world.runtime.release_store.head("math")
    assert head is not None and world.engine.active_release_id("math") == head.release_id
    assert read_book(world.runtime.release_store.materialize(head)) == taught
    recipe = world.runtime.recipe
    system_prompt, examples = recipe.surface.prompt(recipe, world.runtime.release_store.materialize(head))
    assert system_prompt == "Reply with the answer only." and dict(examples) == taught
    await world.runtime.stop()
