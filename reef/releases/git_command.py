"""Running the git CLI against one bare repository.

Why the git CLI and not pygit2 or dulwich: the release store leans on exactly the plumbing git itself ships
and keeps atomic — `update-ref <ref> <new> <old>` (compare-and-swap on a ref, under git's own lock file),
`update-ref --stdin` transactions, `push --force-with-lease=<ref>:<old>` (the same CAS on a remote),
`hash-object`/`update-index`/`write-tree`/`commit-tree` (commits built without a working tree) — and on
`git lfs push/fetch` for weight files, which neither library implements. pygit2 also needs a libgit2 build
that matches the wheel, and dulwich has no LFS transfer and no server-side lease semantics. A subprocess costs a
few milliseconds; a publish runs about six of them.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reef.core.errors import ReefError
from reef.core.private_files import PRIVATE_DIRECTORY_MODE

ZERO_ID = "0" * 40
_CONFIG_ATTEMPTS = 20
_IDENTITY = {
    "GIT_AUTHOR_NAME": "reef",
    "GIT_AUTHOR_EMAIL": "reef@localhost",
    "GIT_COMMITTER_NAME": "reef",
    "GIT_COMMITTER_EMAIL": "reef@localhost",
    "GIT_TERMINAL_PROMPT": "0",  # a remote that wants a password fails instead of hanging the server
}


class GitError(ReefError):
    """A git command failed for a reason that is not the caller's fault (corruption, unreachable remote)."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(args[:3])} failed ({returncode}): {stderr.strip()[:500]}")
        self.returncode = returncode
        self.stderr = stderr


class GitRepository:
    """A bare repository reached through `git --git-dir=…`; each call is one subprocess."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = {**os.environ, **_IDENTITY, **(env or {})}
        done = subprocess.run(
            ["git", f"--git-dir={self.git_dir}", *args],
            input=input,
            capture_output=True,
            env=full_env,
        )
        if check and done.returncode != 0:
            raise GitError(args, done.returncode, done.stderr.decode(errors="replace"))
        return done

    def text(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> str:
        return self.run(*args, input=input, env=env).stdout.decode().strip()

    def resolve(self, ref: str) -> str | None:
        """The commit id `ref` points at, or None when the ref does not exist."""
        done = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if done.returncode != 0:
            return None
        return done.stdout.decode().strip() or None

    def has_object(self, object_id: str) -> bool:
        return self.run("cat-file", "-e", object_id, check=False).returncode == 0

    def init_bare(self, settings: Mapping[str, str]) -> None:
        """Create the repository if missing and make sure its local config holds `settings`.

        Several processes may open the same repository at once: `git init` is idempotent, and config is only
        written when a value differs (git refuses a second concurrent writer of the config file, so retry).
        """
        if not (self.git_dir / "HEAD").exists():
            self.git_dir.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "--quiet", "--bare", str(self.git_dir)], check=True, capture_output=True)
            os.chmod(self.git_dir, PRIVATE_DIRECTORY_MODE)  # releases are the operator's: nobody else reads them
        for attempt in range(_CONFIG_ATTEMPTS):
            listing = self.run("config", "--local", "--list").stdout.decode().splitlines()
            present = dict(line.split("=", 1) for line in listing if "=" in line)
            missing = {k: v for k, v in settings.items() if present.get(k.lower()) != v}
            if not missing:
                return
            for key, value in missing.items():
                done = self.run("config", "--local", key, value, check=False)
                if done.returncode != 0 and attempt == _CONFIG_ATTEMPTS - 1:
                    raise GitError(["config", key], done.returncode, done.stderr.decode(errors="replace"))
            time.sleep(0.02 * attempt)

    def read_blobs(self, object_ids: Sequence[str]) -> list[bytes]:
        """The contents of several blobs in one `cat-file --batch` call, in order."""
        if not object_ids:
            return []
        out = self.run("cat-file", "--batch", input="".join(f"{o}\n" for o in object_ids).encode()).stdout
        blobs: list[bytes] = []
        position = 0
        for object_id in object_ids:
            header_end = out.index(b"\n", position)
            header = out[position:header_end].split()
            if len(header) < 3:
                raise GitError(["cat-file", "--batch"], 1, f"missing object {object_id}")
            size = int(header[2])
            start = header_end + 1
            blobs.append(out[start : start + size])
            position = start + size + 1  # content is followed by a newline
        return blobs
