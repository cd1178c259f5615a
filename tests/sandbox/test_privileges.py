"""The sandbox takes every privilege away, whoever starts it (root too, as in CI): a new user namespace with no
capabilities, so read-only binds stay read-only, no device can be made, and (where bubblewrap can) no further user
namespace either; and it binds an interpreter's own installation, never a directory that holds other things."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from reef.sandbox import bwrap_available, bwrap_prefix, needed_by, run_sandboxed
from reef.sandbox.bubblewrap import bwrap_features
from reef.sandbox.policy import probe_isolation

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (bwrap) is not installed")

# Tries, from inside the sandbox, what only a privileged process could do, and prints what happened as JSON.
PROBE = r"""
import ctypes, errno, json, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_REMOUNT, MS_BIND = 32, 4096
said = {}
status = open("/proc/self/status").read().splitlines()
said["caps"] = {line.split(":")[0]: int(line.split()[1], 16) for line in status if line.startswith("Cap")}
if libc.mount(b"none", b"/usr", None, MS_REMOUNT | MS_BIND, None) == 0:
    said["remount"] = "done"
else:
    said["remount"] = errno.errorcode[ctypes.get_errno()]
try:
    with open("/usr/" + sys.argv[1], "w") as file:
        file.write("written from inside the sandbox")
    said["write"] = "done"
except OSError as error:
    said["write"] = errno.errorcode[error.errno]
try:
    os.mknod("block", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    said["mknod"] = "done"
except OSError as error:
    said["mknod"] = errno.errorcode[error.errno]
said["userns"] = "done" if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()]  # CLONE_NEWUSER
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def inside() -> dict[str, object]:
    """What the probe could do inside a sandbox (`run_sandboxed` with bubblewrap, as checks and discovery run)."""
    if not bwrap_available():
        pytest.skip("bubblewrap (bwrap) is not installed")
    name = f".reef-sandbox-probe-{secrets.token_hex(8)}"
    try:
        result = run_sandboxed([sys.executable, "-I", "probe.py", name], {"probe.py": PROBE}, sandbox=True)
    finally:
        leaked = Path("/usr") / name
        written = leaked.exists()
        leaked.unlink(missing_ok=True)
    assert result.ok, result.stderr
    said: dict[str, object] = json.loads(result.stdout)
    said["leaked"] = written
    return said


@needs_bwrap
def test_the_sandbox_starts_here_with_its_own_command_line() -> None:
    assert probe_isolation().available
    argv = bwrap_prefix(Path("/nonexistent-root"), Path("/nonexistent-root"))
    assert "--unshare-user" in argv and argv[argv.index("--cap-drop") + 1] == "ALL"


@needs_bwrap
def test_a_sandboxed_process_has_no_capabilities_even_when_root_starts_it(inside: dict[str, object]) -> None:
    caps = inside["caps"]
    assert isinstance(caps, dict)
    assert caps["CapEff"] == 0 and caps["CapPrm"] == 0 and caps["CapBnd"] == 0 and caps["CapAmb"] == 0, caps


@needs_bwrap
def test_a_read_only_bind_cannot_be_remounted_writable_or_written(inside: dict[str, object]) -> None:
    assert inside["remount"] != "done"
    assert inside["write"] != "done" and not inside["leaked"], "a write to /usr reached the host"


@needs_bwrap
def test_no_device_node_can_be_made(inside: dict[str, object]) -> None:
    assert inside["mknod"] == "EPERM"


@needs_bwrap
def test_no_further_user_namespace_can_be_made_where_bubblewrap_can_forbid_it(inside: dict[str, object]) -> None:
    if "--disable-userns" not in bwrap_features():
        pytest.skip("this bubblewrap has no --disable-userns")
    assert inside["userns"] != "done"


def _tree(tmp_path: Path, interpreter: Path) -> Path:
    """A program directory whose script names `interpreter` in its shebang."""
    programs = tmp_path / "programs"
    programs.mkdir(parents=True)
    (programs / "agent").write_text(f"#!{interpreter}\nprint('ran')\n")
    (programs / "agent").chmod(0o755)
    return programs


def test_a_shebang_into_a_directory_of_other_things_binds_the_interpreter_alone(tmp_path: Path) -> None:
    local = tmp_path / "home" / ".local"  # like ~/.local: scripts, user packages, data, none of them the program's
    (local / "bin").mkdir(parents=True)
    (local / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (local / "share" / "secrets").mkdir(parents=True)
    interpreter = local / "bin" / "python3"
    interpreter.write_text("")
    programs = _tree(tmp_path, interpreter)
    needed = needed_by(programs)
    assert set(needed) == {programs, interpreter}
    assert not [path for path in needed if interpreter.is_relative_to(path) and path != interpreter]


def test_a_virtualenvs_interpreter_binds_the_virtualenv_and_what_it_links_to(tmp_path: Path) -> None:
    venv = tmp_path / "tools" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    programs = _tree(tmp_path, venv / "bin" / "python")
    needed = needed_by(programs)
    assert venv in needed and tmp_path / "tools" not in needed and tmp_path not in needed


def test_a_node_installation_is_bound_but_not_a_prefix_that_only_holds_packages(tmp_path: Path) -> None:
    node = tmp_path / "node-v20"
    (node / "bin").mkdir(parents=True)
    (node / "lib" / "node_modules").mkdir(parents=True)
    (node / "bin" / "node").write_text("")
    assert needed_by(_tree(tmp_path / "a", node / "bin" / "node")) == sorted([tmp_path / "a" / "programs", node])
    packages = tmp_path / "npm-global"  # an npm prefix without node of its own
    (packages / "bin").mkdir(parents=True)
    (packages / "lib" / "node_modules").mkdir(parents=True)
    (packages / "bin" / "node").symlink_to(node / "bin" / "node")
    needed = needed_by(_tree(tmp_path / "b", packages / "bin" / "node"))
    assert packages not in needed and node in needed


@needs_bwrap
def test_a_script_whose_interpreter_is_a_link_in_such_a_directory_runs_and_sees_nothing_else(tmp_path: Path) -> None:
    local = tmp_path / "home" / ".local"
    (local / "bin").mkdir(parents=True)
    (local / "share").mkdir()
    (local / "share" / "secret").write_text("kept")
    interpreter = local / "bin" / "python3"
    interpreter.symlink_to(sys.executable)
    programs = _tree(tmp_path, interpreter)
    (programs / "agent").write_text(f"#!{interpreter}\nimport os\nprint(os.path.exists({str(local / 'share')!r}))\n")
    root = tmp_path / "root"
    root.mkdir()
    argv = [*bwrap_prefix(root, root, needed_by(programs)), str(programs / "agent")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
