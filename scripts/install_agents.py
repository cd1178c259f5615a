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
    failed = 0
    for path in sorted(ADAPTERS.glob("*.json")):
        requires = json.loads(path.read_text())["requires"]
        if "npm" not in requires or (names and path.stem not in names):
            continue
        binary, package, version = requires["binary"], requires["npm"], requires["version"]
        found = installed_version(binary)
        if found == version:
            continue
        print(f"{binary}: installing {package}@{version} (found {found or 'none'})")
        done = subprocess.run(["npm", "install", "-g", "--no-fund", "--no-audit", f"{package}@{version}"])
        if done.returncode != 0 or installed_version(binary) != version:
            print(f"{binary}: not installed at {version}; its episode tests will be skipped")
            failed += 1
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
