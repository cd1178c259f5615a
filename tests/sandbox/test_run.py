"""The sandbox refuses the network and writes outside its root, and kills an attempt past its time and memory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reef.sandbox import Limits, bwrap_available, run_sandboxed

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
PYTHON = sys.executable


def _python(code: str, limits: Limits = Limits(cpu_s=10, wall_s=30), **kwargs: object):  # type: ignore[no-untyped-def]
    return run_sandboxed([PYTHON, "attempt.py"], {"attempt.py": code}, limits, **kwargs)  # type: ignore[arg-type]


def test_an_attempt_runs_in_its_root_and_its_output_comes_back() -> None:
    result = _python("import os; open('out.txt', 'w').write('x'); print(sorted(os.listdir('.')))")
    assert result.ok, result.stderr
    assert "'attempt.py'" in result.stdout and "'out.txt'" in result.stdout


@needs_bwrap
def test_a_sandboxed_attempt_cannot_reach_the_network() -> None:
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=3); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', type(e).__name__)\n"
    )
    result = _python(code)
    assert result.sandboxed and result.ok, result.stderr
    assert "refused" in result.stdout


@needs_bwrap
def test_a_sandboxed_attempt_cannot_write_outside_its_root(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    code = f"open({str(target)!r}, 'w').write('x')"
    result = _python(code)
    assert result.exit_code != 0
    assert not target.exists()
    home = Path.home() / "reef-sandbox-escape.txt"
    assert _python(f"open({str(home)!r}, 'w').write('x')").exit_code != 0
    assert not home.exists()


@needs_bwrap
def test_a_sandboxed_attempt_sees_a_private_tmp(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("host")
    result = _python(f"import os; print(os.path.exists({str(tmp_path / 'secret.txt')!r}))")
    assert result.stdout.strip() == "False" or not str(tmp_path).startswith("/tmp")


def test_an_attempt_past_its_wall_timeout_is_killed() -> None:
    result = _python("import time; time.sleep(60)", Limits(cpu_s=10, wall_s=1.0))
    assert result.timed_out and not result.ok


def test_an_attempt_past_its_cpu_time_is_killed() -> None:
    result = _python("while True: pass", Limits(cpu_s=1, wall_s=60))
    assert not result.timed_out
    assert result.killed  # by SIGXCPU


def test_an_attempt_past_its_memory_limit_fails() -> None:
    result = _python("x = bytearray(800 * 1024 * 1024); print('allocated')", Limits(memory_bytes=256 << 20))
    assert result.exit_code != 0 and "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


def test_the_environment_carries_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = _python("import os; print(os.environ.get('OPENAI_API_KEY'))")
    assert result.stdout.strip() == "None"


def test_without_bubblewrap_the_limits_still_hold() -> None:
    result = _python("import time; time.sleep(60)", Limits(wall_s=1.0), sandbox=False)
    assert result.timed_out and not result.sandboxed
