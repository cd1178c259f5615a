"""The generated reference pages are what the code generates now, so they cannot go stale."""

from __future__ import annotations

import pytest

from reef.cli.reference import CLI_PAGE, CONFIGURATION_PAGE, cli_page, configuration_page, main
from tests.docs.markdown_links import ROOT


@pytest.mark.parametrize(
    ("page", "generate"), [(CONFIGURATION_PAGE, configuration_page), (CLI_PAGE, cli_page)], ids=["configuration", "cli"]
)
def test_the_committed_page_equals_the_generated_one(page, generate) -> None:
    assert (ROOT / page).read_text() == generate(), f"{page} is stale: run `make reference`"


def test_the_check_mode_names_a_stale_page(tmp_path, capsys) -> None:
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--check", "--root", str(tmp_path)]) == 0
    (tmp_path / CLI_PAGE).write_text("# CLI reference\n")
    assert main(["--check", "--root", str(tmp_path)]) == 1
    assert str(CLI_PAGE) in capsys.readouterr().err


def test_a_settings_key_appears_with_its_flag_type_default_and_description() -> None:
    text = configuration_page()
    row = next(line for line in text.splitlines() if line.startswith("| `learning.batch_size`"))
    assert "`--learning.batch-size`" in row
    assert "integer (> 0)" in row
    assert "| `8` |" in row
    assert "Reports a learner step waits for." in row
