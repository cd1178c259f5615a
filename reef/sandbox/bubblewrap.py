"""The bubblewrap command line that puts a process in a fresh root that hides the host.

Inside, the process sees only: the system directories read-only (`/usr`, `/bin`, `/lib*`, `/sbin` and a few files
of `/etc`), the Python environment that runs Reef read-only (so a sandboxed `python` works), each `visible` path
read-only (e.g. an agent's install directory), a private `/tmp`, `/dev` and `/proc`, and its own root read-write.
Everything else — the state directory, the record database, the release repository, the real home directory —
is simply absent. It gets new PID, IPC and network namespaces (no network; `reef.sandbox.netbridge` brings one
endpoint back) and dies with its parent.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read from /etc to start (dynamic loader, users, name service, certificates, alternatives).
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
)


def bwrap_available() -> bool:
    """Whether the `bwrap` binary is on PATH (it may still fail to start: see `reef.sandbox.policy.isolation`)."""
    return shutil.which("bwrap") is not None


def python_environment() -> list[Path]:
    """The directories the running interpreter needs: its virtualenv (if any) and the installation under it."""
    found = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent}
    return sorted(found)


def bwrap_prefix(root: Path, workdir: Path, visible: Iterable[Path] = ()) -> list[str]:
    """`bwrap … --` to put before a command: the system and Python read-only, each of `visible` read-only,
    `root` read-write, `workdir` as the working directory, a private /tmp, new PID/IPC/network namespaces.

    A `visible` path that is the real home directory or holds it is left out (a subdirectory of it is fine).
    """
    home = Path.home().resolve()
    args = ["bwrap"]
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for name in ETC_FILES:
        args += ["--ro-bind-try", name, name]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    shown = {Path(p).resolve() for p in [*python_environment(), *visible] if Path(p).exists()}
    for path in sorted(shown):
        if home.is_relative_to(path) or any(path.is_relative_to(s) for s in (Path("/usr"), Path("/etc"))):
            continue
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(root), str(root), "--remount-ro", "/", "--chdir", str(workdir)]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--die-with-parent"]
    return [*args, "--new-session", "--"]


def needed_by(binary_dir: Path) -> list[Path]:
    """What a program in `binary_dir` needs bound: the directory itself and its scripts' interpreters'
    installations (a virtualenv: its bin/, lib/ and pyvenv.cfg; `#!/usr/bin/env node`: node's prefix, such as the
    npm global prefix)."""
    needed = {binary_dir}
    for entry in binary_dir.iterdir() if binary_dir.is_dir() else []:
        try:
            first = entry.open("rb").readline(512) if entry.is_file() else b""
        except OSError:
            continue
        if first.startswith(b"#!"):
            words = first[2:].decode("utf-8", "replace").split()
            if words and Path(words[0]).name == "env" and len(words) > 1:
                found = shutil.which(words[-1])  # `#!/usr/bin/env node`: wherever node is (e.g. under nvm)
                if found:
                    needed.add(Path(found).resolve().parent.parent)
            elif words:
                needed.add(Path(words[0]).parent.parent)
    return sorted(p for p in needed if p != Path("/"))
