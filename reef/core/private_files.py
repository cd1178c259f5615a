"""Reef's state is its operator's alone: the records hold users' conversations, the release store their agents'
harnesses and weights. What Reef creates for it is private whatever the umask: directories 0700, files 0600."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

PRIVATE_DIRECTORY_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
log = logging.getLogger(__name__)
_warned: set[Path] = set()


def private_directory(path: Path) -> Path:
    """Make the directory `path` (and missing parents) readable by its owner only; an existing one keeps its mode
    (an operator may share it on purpose), with one warning when other users can read it."""
    path = Path(path).expanduser()
    try:
        path.mkdir(mode=PRIVATE_DIRECTORY_MODE)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077 and path.resolve() not in _warned:
            _warned.add(path.resolve())
            log.warning("%s is open to other users (mode %o): chmod 700 it to keep Reef's state private", path, mode)
        return path
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return private_directory(path)
    os.chmod(path, PRIVATE_DIRECTORY_MODE)  # mkdir's mode is masked by the umask: this one is not
    return path


def private_file(path: Path) -> Path:
    """Create the file `path` empty with mode 0600 if it does not exist (an existing file is left as it is), so
    whatever then opens it (SQLite, which gives its journal the same mode) keeps it private."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    os.close(descriptor)
    return Path(path)
