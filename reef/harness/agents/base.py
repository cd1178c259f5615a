"""What an episode needs from one coding agent: its files in the episode root, its command and environment."""

from __future__ import annotations

import abc
import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef.harness.catalog import load_adapter

if TYPE_CHECKING:
    from reef.harness.binding import ModelBinding
    from reef.harness.tree import HarnessTree

_VERSION = re.compile(r"\d+\.\d+\.\d+")


@dataclasses.dataclass(frozen=True, slots=True)
class Launch:
    """The agent's command line (run in `<root>/work`) and the environment entries it adds to the episode's."""

    command: list[str]
    env: dict[str, str]


def agent_env(root: Path) -> dict[str, str]:
    """HOME, TMPDIR and every XDG directory inside the episode root, so no host configuration is read."""
    home = root / "home"
    return {
        "HOME": str(home),
        "TMPDIR": str(root / "tmp"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


class Agent(abc.ABC):
    """One coding agent: its adapter name (= its binary's name) and the npm package and version Reef tests."""

    name: str

    @property
    def npm(self) -> str:
        return str(load_adapter(self.name).requires["npm"])

    @property
    def version(self) -> str:
        """The tested version (`requires.version` of its adapter), which the Makefile installs."""
        return str(load_adapter(self.name).requires["version"])

    def installed_version(self, binary: str | None = None) -> str | None:
        """`BINARY --version`'s version number (pi prints it on stderr), or None when there is none."""
        path = shutil.which(binary or self.name)
        if path is None:
            return None
        try:
            said = subprocess.run(
                [path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        found = _VERSION.search(said)
        return found.group(0) if found else None

    def runtime_paths(self, binary: str) -> list[Path]:
        """What the agent's binary needs to run inside a sandbox that hides the host: its npm package directory
        (native parts included) and, for a Node script, the `node` interpreter's directory."""
        real = Path(shutil.which(binary) or binary).resolve()
        package = next((p for p in real.parents if (p / "package.json").is_file()), real.parent)
        paths = [package]
        try:
            shebang = real.open("rb").readline(256)
        except OSError:
            shebang = b""
        node = shutil.which("node")
        if b"node" in shebang and node is not None:
            paths.append(Path(node).resolve().parent)
        return paths

    @abc.abstractmethod
    def config_dir(self, root: Path) -> Path:
        """Where, inside the episode root, the agent reads its harness (the adapter's files are rendered there)."""

    @abc.abstractmethod
    def launch(self, root: Path, binary: str, task: str, binding: ModelBinding, tree: HarnessTree) -> Launch:
        """Write the model binding under `root` and say how to run the agent on `task` non-interactively."""

    @abc.abstractmethod
    def final_answer(self, trajectory: list[dict[str, Any]]) -> str:
        """The agent's final message in its JSON event stream."""


def scenario_headers(binding: ModelBinding) -> dict[str, str]:
    """The headers that route an episode's requests to its scenario. Reef tags them `reef-episode` itself, from the
    episode's token (tags under `reef-` are Reef's own: a client that sends one gets a 400)."""
    return {"x-reef-scenario": binding.scenario}


def write_private(path: Path, text: str) -> None:
    """A file holding the episode's token: readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def merged_json(path: Path, update: dict[str, Any]) -> str:
    """The JSON already rendered at `path` (the tree's settings) with `update`'s keys merged in on top."""
    current = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(current.get(key), dict):
            current[key] = {**current[key], **value}
        else:
            current[key] = value
    return json.dumps(current, indent=2)
