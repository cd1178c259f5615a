"""`reef --version` names the package version and the commit it was built from."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import reef
from reef.cli.main import main
from reef.cli.version import UNKNOWN, build_commit


def test_reef_version_names_the_version_and_the_checkouts_commit(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out.strip()
    head = subprocess.run(
        ["git", "-C", str(Path(reef.__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert printed == f"reef {reef.__version__} (commit {head or UNKNOWN})"


def test_a_package_outside_any_checkout_has_an_unknown_commit(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "reef"
    package.mkdir(parents=True)
    assert build_commit(package) == UNKNOWN


def test_a_package_inside_someone_elses_repository_does_not_take_its_commit(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
         "-m", "other"],
        check=True,
    )  # fmt: skip
    package = tmp_path / "venv" / "lib" / "reef"
    package.mkdir(parents=True)
    assert build_commit(package) == UNKNOWN


def test_a_commit_recorded_at_build_time_wins(tmp_path: Path) -> None:
    package = tmp_path / "reef"
    package.mkdir()
    (package / "_commit").write_text("abc1234\n")
    assert build_commit(package) == "abc1234"
    assert re.fullmatch(r"[0-9a-f]{7,40}|unknown", build_commit())
