"""The layering of docs/developer/architecture.md: imports only point down. Walks every module's imports (lazy
ones too)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reef"

# layer -> prefixes it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "reef.core": (
        "reef.storage",
        "reef.releases",
        "reef.inference",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.service",
        "reef.cli",
        "sqlalchemy",
        "httpx",
        "aiohttp",
        "torch",
        "transformers",
        "fastapi",
        "subprocess",
        "socket",
    ),
    "reef.storage": ("reef.service", "reef.learning", "reef.recipes", "reef.harness", "reef.cli", "reef.inference"),
    "reef.releases": ("reef.service", "reef.learning", "reef.recipes", "reef.harness", "reef.cli", "reef.inference"),
    # Between replicas: elections and release hints; the learning layer runs them, they know nothing above storage.
    "reef.coordination": (
        "reef.service",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.cli",
        "reef.inference",
    ),
    "reef.inference": ("reef.service", "reef.learning", "reef.recipes", "reef.harness", "reef.cli"),
    # Just above core: the learning and service layers call it, it calls none of them.
    "reef.observability": (
        "reef.storage",
        "reef.releases",
        "reef.inference",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.service",
        "reef.cli",
    ),
    # The step pipeline: learner, steps, growth, judgement, settlement, gate, recovery, and the training launchers.
    # Recipes are loaded by name; the harness reaches it only through a recipe's hooks.
    "reef.learning": (
        "reef.service",
        "reef.cli",
        "reef.demo",
        "reef.application",
        "reef.judge",
        "reef.harness",
        "reef.recipes",
    ),
    # The torch side of training (the job process): below the learning pipeline, which launches it.
    "reef.training": (
        "reef.service",
        "reef.cli",
        "reef.demo",
        "reef.application",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.judge",
        "reef.storage",
        "reef.releases",
        "reef.coordination",
        "reef.discovery",
    ),
    # What the HTTP edge calls: composes the pipeline, the stores and the engine; knows no HTTP and no torch.
    "reef.application": ("reef.service", "reef.cli", "reef.demo", "reef.training", "reef.harness", "torch"),
    # Drivers that talk to a `reef serve` child over HTTP, like any client.
    "reef.demo": ("reef.cli", "reef.service"),
    # The openclawrl judge: sessions, votes, the worker; on the learning contracts, below the recipes.
    "reef.judge": (
        "reef.service",
        "reef.cli",
        "reef.recipes",
        "reef.storage",
        "reef.releases",
        "reef.inference",
        "reef.harness",
        "reef.learning.learner",
        "reef.learning.steps",
        "reef.application.runtime",
        "reef.application.scenarios",
        "torch",
    ),
    "reef.recipes": ("reef.service", "reef.cli", "reef.demo", "reef.application"),
    "reef.harness": ("reef.service", "reef.cli", "reef.demo", "reef.application", "reef.recipes"),
    # Running untrusted things: used by harness episodes and discovery, knows neither.
    "reef.sandbox": (
        "reef.service",
        "reef.cli",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.discovery",
        "reef.inference",
        "reef.storage",
        "reef.releases",
    ),
    # Problems and the search archive: pure domain; evaluating an attempt goes through the sandbox.
    "reef.discovery": (
        "reef.service",
        "reef.cli",
        "reef.learning",
        "reef.recipes",
        "reef.harness",
        "reef.inference",
        "reef.storage",
        "reef.releases",
        "torch",
    ),
    # The edge goes through contracts, never implementations.
    "reef.service": (
        "reef.cli",
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for layer, forbidden in FORBIDDEN.items():
            if module != layer and not module.startswith(layer + "."):
                continue
            for imported in _imports(path):
                if any(imported == f or imported.startswith(f + ".") for f in forbidden):
                    problems.append(f"{module} imports {imported} (forbidden for {layer})")
    return problems


def test_every_import_points_down_the_layers() -> None:
    assert _violations() == []


def test_the_walker_notices_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "reef" / "core"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("from reef.service.app import create_app\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "reef")
    assert _violations() == ["reef.core.bad imports reef.service.app (forbidden for reef.core)"]


def test_importing_the_service_and_the_command_line_imports_no_torch() -> None:
    import subprocess

    probe = (
        "import sys, reef.service.app, reef.application.runtime, reef.cli.main, reef.recipes.sft, reef.recipes.rl; "
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _package_graph() -> dict[str, set[str]]:
    """reef.<package> -> the reef packages its modules import (lazy imports too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(_module_name(path).split(".")[:2])
        for imported in _imports(path):
            target = ".".join(imported.split(".")[:2])
            if imported.startswith("reef.") and target != package:
                graph.setdefault(package, set()).add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as a path that returns to its start, or [] if it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_two_packages_import_each_other_even_through_others() -> None:
    assert _cycle(_package_graph()) == []


def test_the_cycle_finder_notices_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
