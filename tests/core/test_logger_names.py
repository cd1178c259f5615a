"""Every logger under reef/ is named after its module, so a log line says where it came from."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.core.imports import PACKAGE, modules


def misnamed_loggers(root: Path = PACKAGE) -> list[str]:
    """Each `getLogger(...)` call under `root` whose name is neither `__name__` nor its module's dotted name."""
    problems = []
    for module, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if called != "getLogger":
                continue
            name = node.args[0] if node.args else None
            if isinstance(name, ast.Name) and name.id == "__name__":
                continue
            if isinstance(name, ast.Constant) and name.value == module:
                continue
            problems.append(f"{module}:{node.lineno} getLogger({ast.unparse(name) if name else ''}): use __name__")
    return problems


def test_every_logger_is_named_after_its_module() -> None:
    assert misnamed_loggers() == []


def test_a_logger_named_after_another_module_is_noticed(tmp_path: Path) -> None:
    learning = tmp_path / "reef" / "learning"
    learning.mkdir(parents=True)
    (learning / "steps.py").write_text(
        "import logging\n"
        "log = logging.getLogger('reef.learning.learner')\n"
        "ok = logging.getLogger(__name__)\n"
        "also_ok = logging.getLogger('reef.learning.steps')\n"
        "root = logging.getLogger()\n"
    )
    assert misnamed_loggers(tmp_path / "reef") == [
        "reef.learning.steps:2 getLogger('reef.learning.learner'): use __name__",
        "reef.learning.steps:5 getLogger(): use __name__",
    ]
