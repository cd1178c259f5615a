"""The layering of docs/developer/architecture.md: its layer table is the allowlist of what each package imports.

Walks every module's imports (lazy and type-only ones too) and compares them with the table: a package imports only
the packages its row lists, a row lists only packages its modules import, a row names only rows below it, and every
package under reef/ has a row.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.core.imports import PACKAGE, module_imports, modules, package_of

PAGE = Path(__file__).resolve().parents[2] / "docs" / "developer" / "architecture.md"
PAGE_NAME = "docs/developer/architecture.md"

# Within the packages a row allows: modules and libraries a layer must still not reach.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "reef.core": ("sqlalchemy", "httpx", "aiohttp", "torch", "transformers", "fastapi", "subprocess", "socket"),
    # What the HTTP edge calls knows no torch.
    "reef.application": ("torch",),
    # The judge is on the learning contracts, not the pipeline that runs them.
    "reef.judge": ("reef.learning.learner", "reef.learning.steps", "torch"),
    "reef.discovery": ("torch",),
    # The edge goes through contracts, never implementations.
    "reef.service": (
        "reef.storage.sql",
        "reef.storage.group_commit",
        "reef.releases.git",
        "reef.inference.local",
        "reef.inference.upstream",
        "reef.learning.learner",
        "reef.learning.steps",
        "reef.learning.backends",
        "torch",
        "sqlalchemy",
    ),
}


def layer_table(text: str) -> list[tuple[str, frozenset[str]]]:
    """The rows of the page's layer table, top first: (package, the reef packages its row lists)."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`reef."):
            continue
        listed = {name.strip().strip("`") for name in cells[1].split(",") if name.strip() not in ("", "—")}
        rows.append((cells[0].strip("`"), frozenset(f"reef.{name}" for name in listed)))
    return rows


def _packages(root: Path) -> set[str]:
    return {package_of(module) for module in modules(root)} - {"reef"}


def _imports_by_package(root: Path) -> dict[str, dict[str, str]]:
    """reef.<package> -> {each other reef package it imports: the first module that imports it}."""
    found: dict[str, dict[str, str]] = {}
    for module, path in modules(root).items():
        package = package_of(module)
        for imported in sorted(module_imports(path, root)):
            target = package_of(imported)
            if imported.startswith("reef.") and target not in (package, "reef"):
                found.setdefault(package, {}).setdefault(target, f"{module} imports {imported}")
    return found


def _short(packages: object) -> str:
    return ", ".join(f"`{name.removeprefix('reef.')}`" for name in sorted(packages))  # type: ignore[attr-defined]


def table_problems(rows: list[tuple[str, frozenset[str]]], root: Path = PACKAGE) -> list[str]:
    """Each way the layer table and the import graph disagree, saying which row to change and how."""
    problems = []
    allowed = dict(rows)
    order = [package for package, _ in rows]
    imports = _imports_by_package(root)
    for package in sorted(_packages(root) - set(allowed)):
        problems.append(
            f"{package} has no row in the layer table of {PAGE_NAME}: add `| `{package}` | "
            f"{_short(imports.get(package, {})) or '—'} | what it holds |` above every row it imports"
        )
    for package in sorted(set(allowed) - _packages(root)):
        problems.append(f"the `{package}` row of the layer table of {PAGE_NAME} names no package: remove it")
    for package, listed in rows:
        used = imports.get(package, {})
        for target in sorted(set(used) - listed):
            problems.append(
                f"{used[target]}: add `{target.removeprefix('reef.')}` to the imports of the `{package}` row "
                f"in {PAGE_NAME}"
            )
        for target in sorted(listed - set(used)):
            problems.append(
                f"no module of {package} imports {target}: remove `{target.removeprefix('reef.')}` from the "
                f"imports of the `{package}` row in {PAGE_NAME}"
            )
        for target in sorted(listed):
            if target in order and order.index(target) <= order.index(package):
                problems.append(
                    f"the `{package}` row in {PAGE_NAME} imports `{target.removeprefix('reef.')}`, which is not "
                    f"below it: an upward arrow (move the `{package}` row above the `{target}` row, or drop the import)"
                )
    return problems


def test_the_layer_table_matches_what_each_package_imports() -> None:
    assert table_problems(layer_table(PAGE.read_text())) == []


def test_the_table_reader_finds_every_row_of_the_page() -> None:
    rows = layer_table(PAGE.read_text())
    assert rows[-1] == ("reef.core", frozenset())
    assert len(rows) == len(_packages(PACKAGE)) and ("reef.sandbox", frozenset()) in rows


def test_an_import_the_table_does_not_list_and_a_package_without_a_row_fail(tmp_path: Path) -> None:
    (tmp_path / "reef" / "core").mkdir(parents=True)
    (tmp_path / "reef" / "service").mkdir()
    (tmp_path / "reef" / "fresh").mkdir()
    (tmp_path / "reef" / "core" / "bad.py").write_text("def f():\n    from reef.service.app import create_app\n")
    (tmp_path / "reef" / "service" / "app.py").write_text("from reef.core import values\n")
    (tmp_path / "reef" / "fresh" / "thing.py").write_text("")
    rows = [("reef.service", frozenset({"reef.core"})), ("reef.core", frozenset())]
    assert table_problems(rows, tmp_path / "reef") == [
        f"reef.fresh has no row in the layer table of {PAGE_NAME}: add `| `reef.fresh` | — | what it holds |` "
        "above every row it imports",
        f"reef.core.bad imports reef.service.app: add `service` to the imports of the `reef.core` row in {PAGE_NAME}",
    ]


def test_a_stale_entry_and_an_upward_arrow_in_the_table_fail(tmp_path: Path) -> None:
    (tmp_path / "reef" / "core").mkdir(parents=True)
    (tmp_path / "reef" / "service").mkdir()
    (tmp_path / "reef" / "core" / "values.py").write_text("from reef.service import app\n")
    (tmp_path / "reef" / "service" / "app.py").write_text("")
    rows = [("reef.service", frozenset({"reef.core"})), ("reef.core", frozenset({"reef.service"}))]
    assert table_problems(rows, tmp_path / "reef") == [
        f"no module of reef.service imports reef.core: remove `core` from the imports of the `reef.service` row in "
        f"{PAGE_NAME}",
        f"the `reef.core` row in {PAGE_NAME} imports `service`, which is not below it: an upward arrow (move the "
        "`reef.core` row above the `reef.service` row, or drop the import)",
    ]


def _forbidden_reaches(root: Path = PACKAGE) -> list[str]:
    problems = []
    for module, path in modules(root).items():
        forbidden = FORBIDDEN.get(package_of(module), ())
        for imported in sorted(module_imports(path, root)):
            if any(imported == f or imported.startswith(f + ".") for f in forbidden):
                problems.append(f"{module} imports {imported} (forbidden for {package_of(module)})")
    return problems


def test_no_layer_reaches_a_module_or_library_kept_from_it() -> None:
    assert _forbidden_reaches() == []


def test_the_walker_notices_a_forbidden_module(tmp_path: Path) -> None:
    fake = tmp_path / "reef" / "service"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("from reef.storage.sql import open_record_store\n")
    assert _forbidden_reaches(tmp_path / "reef") == [
        "reef.service.bad imports reef.storage.sql (forbidden for reef.service)"
    ]


def test_importing_the_service_and_the_command_line_imports_no_torch() -> None:
    import subprocess

    probe = (
        "import sys, reef.service.app, reef.application.runtime, reef.cli.main, reef.recipes.sft, reef.recipes.rl; "
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def named_paths(text: str) -> list[str]:
    """The files, folders and modules of the repository a page names in code spans (`reef/…`, `tests/…`, `reef.…`)."""
    spans = re.findall(r"`([^`\s]+)`", text)
    return [span for span in spans if re.fullmatch(r"(reef|tests)/[\w/.-]+|reef(\.\w+)+", span)]


def missing_paths(text: str, checkout: Path = PACKAGE.parent) -> list[str]:
    """Each path or module `named_paths` finds that the checkout does not hold."""
    missing = []
    for name in named_paths(text):
        where = checkout / name if "/" in name else checkout.joinpath(*name.split("."))
        if not (where.exists() or where.with_suffix(".py").is_file()):
            missing.append(name)
    return missing


def test_every_file_and_module_the_architecture_page_names_exists() -> None:
    assert missing_paths(PAGE.read_text()) == []


def test_a_renamed_module_on_the_page_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "reef" / "learning").mkdir(parents=True)
    (tmp_path / "reef" / "learning" / "steps.py").write_text("")
    page = "`reef/learning/steps.py`, `reef.learning.steps`, `reef/learning/rollout/`, `reef.learning.gone`, `x.py`"
    assert missing_paths(page, tmp_path) == ["reef/learning/rollout/", "reef.learning.gone"]
