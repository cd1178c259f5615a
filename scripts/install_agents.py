"""Install the coding agents the harness gate runs, each at the version Reef tests (`requires.version` in
reef/harness/adapters/<agent>.json), with npm; an agent whose installed `--version` already matches is left alone.

    python3 scripts/install_agents.py [AGENT ...]     # default: every adapter that names an npm package

Without npm it says so and exits 0: the agents' tests then skip with that reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ADAPTERS = Path(__file__).resolve().parent.parent / "reef" / "harness" / "adapters"


def installed_version(binary: str) -> str | None:
    if shutil.which(binary) is None:
        return None
    try:
        said = subprocess.run(
            [binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\d+\.\d+\.\d+", said)
    return found.group(0) if found else None


def main(names: list[str]) -> int:
    if shutil.which("npm") is None:
        print("npm is not installed: the coding agents (pi, claude, codex, opencode) and their tests are skipped")
        return 0
    wanted: dict[str, tuple[str, str]] = {}  # binary: (package, version) of each agent not at its version
    for path in sorted(ADAPTERS.glob("*.json")):
        requires = json.loads(path.read_text())["requires"]
        if "npm" not in requires or (names and path.stem not in names):
            continue
        binary, package, version = requires["binary"], requires["npm"], requires["version"]
        found = installed_version(binary)
        if found != version:
            print(f"{binary}: installing {package}@{version} (found {found or 'none'})")
            wanted[binary] = (package, version)
    if not wanted:
        return 0
    # One npm command fetches every package at once; when it fails, each is installed alone to name the one at fault.
    if _npm_install([f"{package}@{version}" for package, version in wanted.values()]) != 0:
        for package, version in wanted.values():
            _npm_install([f"{package}@{version}"])
    failed = 0
    for binary, (_, version) in wanted.items():
        if installed_version(binary) != version:
            print(f"{binary}: not installed at {version}; its episode tests will be skipped")
            failed += 1
    return 0 if not failed else 1


def _npm_install(specs: list[str]) -> int:
    return subprocess.run(["npm", "install", "-g", "--no-fund", "--no-audit", *specs]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
