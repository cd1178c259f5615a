"""The version `reef --version` prints: the package version and the git commit the code was built from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import reef

UNKNOWN = "unknown"
# A packager may write the commit here at build time; a source checkout asks git instead.
COMMIT_FILE = Path(reef.__file__).parent / "_commit"


def build_commit(package_dir: Path | None = None) -> str:
    """The short commit hash of the checkout `package_dir` (the `reef` package) lives in, else `unknown`."""
    package_dir = package_dir or Path(reef.__file__).parent
    recorded = package_dir / COMMIT_FILE.name
    if recorded.is_file():
        return recorded.read_text().strip() or UNKNOWN
    try:
        found = subprocess.run(
            ["git", "-C", str(package_dir), "rev-parse", "--show-toplevel", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    # Only the checkout the package itself belongs to counts, not a repository that happens to enclose an install.
    if len(found) != 2 or Path(found[0]).resolve() != package_dir.resolve().parent:
        return UNKNOWN
    return found[1]


def version_line() -> str:
    return f"reef {reef.__version__} (commit {build_commit()})"
