"""No import cycles under reef/: between packages, and between modules (lazy and type-only imports included)."""

from __future__ import annotations

from pathlib import Path

from tests.core.imports import PACKAGE, module_imports, modules, package_of


def package_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """reef.<package> -> the other reef packages its modules import."""
    graph: dict[str, set[str]] = {}
    for module, path in modules(root).items():
        package = package_of(module)
        for imported in module_imports(path, root):
            target = package_of(imported)
            if imported.startswith("reef.") and target not in (package, "reef"):
                graph.setdefault(package, set()).add(target)
    return graph


def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module under reef/ -> the other modules under reef/ it imports (a package stands for its __init__)."""
    known = modules(root)
    return {
        module: {imported for imported in module_imports(path, root) if imported in known and imported != module}
        for module, path in known.items()
    }


def cycle(graph: dict[str, set[str]]) -> list[str]:
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
    assert cycle(package_graph()) == []


def test_no_two_modules_import_each_other_even_through_others() -> None:
    assert cycle(module_graph()) == []


def test_the_cycle_finder_notices_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_a_type_only_import_back_is_a_module_cycle(tmp_path: Path) -> None:
    agents = tmp_path / "reef" / "harness" / "agents"
    agents.mkdir(parents=True)
    (agents / "__init__.py").write_text("from reef.harness.agents.base import Agent\n")
    (agents / "base.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reef.harness.episodes import Binding\n"
    )
    (tmp_path / "reef" / "harness" / "episodes.py").write_text("from reef.harness import agents\n")
    assert cycle(module_graph(tmp_path / "reef")) == [
        "reef.harness.agents",
        "reef.harness.agents.base",
        "reef.harness.episodes",
        "reef.harness.agents",
    ]
