"""The bubblewrap command line that puts a process in a fresh root: host read-only, private /tmp, no network."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from pathlib import Path


def bwrap_available() -> bool:
    """Whether the `bwrap` binary is on PATH."""
    return shutil.which("bwrap") is not None


def bwrap_prefix(root: Path, workdir: Path, visible: Iterable[Path] = ()) -> list[str]:
    """`bwrap … --` to put before a command: `/` read-only, a private /tmp, `root` writable, `workdir` as the
    working directory, new PID/IPC/network namespaces, killed with its parent.

    The private /tmp hides anything under the host's /tmp: each of `visible` (and this interpreter's environment)
    that lies under /tmp is brought back read-only, so a virtualenv or a binary there still runs.
    """
    needed = sorted({p for p in [*visible, Path(sys.executable).parent.parent] if _under_tmp(p)})
    binds = [arg for path in needed for arg in ("--ro-bind", str(path), str(path))]
    return [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *binds,
        "--bind", str(root), str(root), "--chdir", str(workdir),
        "--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent", "--new-session", "--",
    ]  # fmt: skip


def needed_under_tmp(binary_dir: Path) -> list[Path]:
    """Directories under /tmp a program in `binary_dir` needs: the directory itself and its scripts' interpreters'."""
    needed = {binary_dir}
    for entry in binary_dir.iterdir() if binary_dir.is_dir() else []:
        try:
            first = entry.open("rb").readline(512) if entry.is_file() else b""
        except OSError:
            continue
        if first.startswith(b"#!"):
            interpreter = Path(first[2:].decode("utf-8", "replace").split()[0])
            needed.add(interpreter.parent.parent)  # e.g. a virtualenv: its bin/, lib/ and pyvenv.cfg
    return sorted(p for p in needed if _under_tmp(p))


def _under_tmp(path: Path) -> bool:
    return path.is_relative_to("/tmp") and path != Path("/tmp")
