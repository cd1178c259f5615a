"""tests/ mirrors reef/: each folder of tests holds the tests of the reef package of the same path, and every reef
package has its folder. A few folders hold what no one package owns; they are listed here."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "reef"

# Folders whose tests or helpers cut across packages: the shared stand-ins, whole runs of `reef serve` and the
# demos, the documentation's own checks, and the modules the documentation's examples are.
CROSS_CUTTING = frozenset({"fakes", "e2e", "docs", "examples"})


def _holds_python(folder: Path) -> bool:
    return any(path.suffix == ".py" for path in folder.iterdir())


def unmirrored_test_folders(tests: Path = TESTS, package: Path = PACKAGE) -> list[str]:
    """Each folder under `tests` holding a test module whose path names no folder of Python modules in `package`."""
    problems = []
    for test in sorted(tests.rglob("test_*.py")):
        relative = test.parent.relative_to(tests)
        if not relative.parts or relative.parts[0] in CROSS_CUTTING:
            continue
        mirrored = package.joinpath(*relative.parts)
        if not (mirrored.is_dir() and _holds_python(mirrored)):
            problems.append(f"tests/{relative.as_posix()}")
    return sorted(set(problems))


def untested_packages(tests: Path = TESTS, package: Path = PACKAGE) -> list[str]:
    """Each top-level reef package with no folder of tests of the same name."""
    packages = {path.name for path in package.iterdir() if path.is_dir() and any(path.rglob("*.py"))}
    return sorted(f"reef/{name}" for name in packages if not any(tests.joinpath(name).rglob("test_*.py")))


def test_every_folder_of_tests_mirrors_a_reef_package() -> None:
    assert unmirrored_test_folders() == []


def test_every_reef_package_has_its_folder_of_tests() -> None:
    assert untested_packages() == []


def test_a_folder_without_its_package_and_a_package_without_its_folder_are_noticed(tmp_path: Path) -> None:
    for folder in ("reef/learning/evaluation", "reef/training", "tests/learning/evaluation", "tests/cli", "tests/e2e"):
        (tmp_path / folder).mkdir(parents=True)
    for module in ("reef/learning/evaluation/tasks.py", "reef/training/job.py"):
        (tmp_path / module).write_text("")
    for test in ("learning/evaluation/test_tasks.py", "cli/test_serve.py", "e2e/test_demo.py"):
        (tmp_path / "tests" / test).write_text("")
    assert unmirrored_test_folders(tmp_path / "tests", tmp_path / "reef") == ["tests/cli"]
    assert untested_packages(tmp_path / "tests", tmp_path / "reef") == ["reef/training"]
