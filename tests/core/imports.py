"""Reading what each module under reef/ imports, from its source: lazy and type-only imports too, relative ones
resolved, and `from package import module` read as that module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "reef"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """The dotted name of the module at `path` under the package directory `root`."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The layer a module belongs to: `reef.<package>` (or `reef` itself)."""
    return ".".join(module.split(".")[:2])


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under `root` by its dotted name."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def module_imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every module or package `path` imports anywhere in its source, by absolute dotted name."""
    name = module_name(path, root)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if _is_module(submodule, root) else source)
    return found


def _is_module(dotted: str, root: Path) -> bool:
    parts = dotted.split(".")
    if parts[0] != root.name:
        return False
    where = root.parent.joinpath(*parts)
    return where.with_suffix(".py").is_file() or where.is_dir()
