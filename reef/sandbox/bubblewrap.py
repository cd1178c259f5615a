"""The bubblewrap command line that puts a process in a fresh root that hides the host.

Inside, the process sees only: the system directories read-only (`/usr`, `/bin`, `/lib*`, `/sbin` and a few files
of `/etc`), the Python environment that runs Reef read-only (so a sandboxed `python` works), each `visible` path
read-only (e.g. an agent's install directory), a private `/tmp`, `/dev` and `/proc`, and its own root read-write.
Everything else — the state directory, the record database, the release repository, the real home directory —
is simply absent. It gets new PID, IPC and network namespaces (no network; `reef.sandbox.netbridge` brings one
endpoint back) and dies with its parent.

It also gets a new user namespace with no capabilities at all, whoever starts it: bubblewrap started by root makes no
user namespace and keeps root's capabilities unless told otherwise, and with them a sandboxed process could remount
its read-only binds writable or create device nodes. Where the installed bubblewrap can (`--disable-userns`), the
process cannot make further user namespaces either, so it cannot win capabilities back in a namespace of its own.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
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


# Flags that newer bubblewrap releases understand and older ones refuse: used only where `bwrap --help` lists them.
OPTIONAL_FLAGS = ("--disable-userns", "--assert-userns-disabled")
HELP_TIMEOUT_S = 10.0


@functools.cache
def _supported(binary: str | None) -> frozenset[str]:
    """Which of OPTIONAL_FLAGS the bubblewrap at `binary` lists in its `--help` (none when it cannot say)."""
    if binary is None:
        return frozenset()
    try:
        done = subprocess.run([binary, "--help"], capture_output=True, timeout=HELP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    listed = set((done.stdout + done.stderr).decode("utf-8", "replace").split())
    return frozenset(flag for flag in OPTIONAL_FLAGS if flag in listed)


def bwrap_features() -> frozenset[str]:
    """The optional flags (OPTIONAL_FLAGS) that the `bwrap` on PATH supports; asked once per binary."""
    return _supported(shutil.which("bwrap"))


def privilege_flags() -> list[str]:
    """What takes every privilege away inside the sandbox, whoever starts it: a new user namespace, no capabilities,
    and (where this bubblewrap supports it) no further user namespaces inside."""
    flags = ["--unshare-user", "--cap-drop", "ALL"]
    supported = bwrap_features()
    return flags + [flag for flag in OPTIONAL_FLAGS if flag in supported]


def python_environment() -> list[Path]:
    """The directories the running interpreter needs: its virtualenv (if any) and the installation under it."""
    found = {Path(sys.prefix), Path(sys.base_prefix), installation(Path(sys.executable).resolve())}
    return sorted(found)


def installation(program: Path) -> Path:
    """The directory that is `program`'s own installation, for a program in its `bin/`: a virtualenv (it holds
    `pyvenv.cfg`), a Python installation (its standard library), a Node installation (`bin/node` and
    `lib/node_modules`). Anything else — `~/.local`, a home directory, `/` — holds more than the program, so the
    answer is then the program file alone."""
    prefix = program.parent.parent
    if program.parent.name != "bin" or prefix == Path(prefix.anchor) or Path.home().resolve().is_relative_to(prefix):
        return program
    is_venv = (prefix / "pyvenv.cfg").is_file()
    is_python = any(prefix.glob("lib*/python3*/os.py"))
    node = prefix / "bin" / "node"
    is_node = node.is_file() and not node.is_symlink() and (prefix / "lib" / "node_modules").is_dir()
    return prefix if is_venv or is_python or is_node else program


def bwrap_prefix(root: Path, workdir: Path, visible: Iterable[Path] = ()) -> list[str]:
    """`bwrap … --` to put before a command: the system and Python read-only, each of `visible` read-only,
    `root` read-write, `workdir` as the working directory, a private /tmp, new PID/IPC/network namespaces, a new user
    namespace with no capabilities (`privilege_flags`).

    A `visible` path that is the real home directory or holds it is left out (a subdirectory of it is fine); one that
    is a symbolic link is bound where it points and the link made again at its own place.
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
    wanted = [Path(p).absolute() for p in [*python_environment(), *visible] if Path(p).exists()]
    shown = {p.resolve() for p in wanted}
    bound: list[Path] = []
    for path in sorted(shown):
        if home.is_relative_to(path) or any(path.is_relative_to(s) for s in (Path("/usr"), Path("/etc"), *bound)):
            continue
        bound.append(path)
        args += ["--ro-bind", str(path), str(path)]
    present = [*bound, *(Path(name) for name in (*SYSTEM_DIRS, "/etc"))]  # where a link already shows
    for link in sorted({p for p in wanted if p.is_symlink() and not any(p.is_relative_to(s) for s in present)}):
        args += ["--symlink", str(link.resolve()), str(link)]
    args += ["--bind", str(root), str(root), "--remount-ro", "/", "--chdir", str(workdir)]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", *privilege_flags()]
    return [*args, "--die-with-parent", "--new-session", "--"]


def needed_by(binary_dir: Path) -> list[Path]:
    """What a program in `binary_dir` needs bound: the directory itself and its scripts' interpreters' own
    installations (`installation`: a virtualenv, a Python or Node installation such as nvm's; else the interpreter
    file alone), for the interpreter as named and, when that is a link, for where it points."""
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
                    needed.add(installation(Path(found).resolve()))
            elif words:
                named = Path(words[0])
                needed |= {installation(named), installation(named.resolve())}
    return sorted(p for p in needed if p != Path("/"))
