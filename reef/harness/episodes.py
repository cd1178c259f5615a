"""Episodes: run a real agent on one task, in a fresh temporary root holding the rendered tree and the model
binding, with a timeout, a residue check and the trajectory read back.

Agent episodes (`pi`, `claude`, `codex`, `opencode`) run the agent's binary non-interactively; what each one
needs (where it reads its tree, how it is bound to this Reef, its command line) is in `reef.harness.agents`.
HOME, TMPDIR and the XDG directories point inside the root, so no host configuration or credential is read.
`chat` episodes are one request through the engine with the chat adapter's system prompt.

Sandboxing (`reef.sandbox`): the agent sees the system directories, the Python environment and its own install
directory read-only, a private /tmp, its own writable root (HOME and the XDG config, cache and data directories
inside it) and its own PID namespace, and no network (`--unshare-net`) but the model endpoint: since that also
removes the host's loopback, Reef's address is brought in over a Unix socket in the root and a forwarder inside the
sandbox listening on Reef's port (`reef.sandbox.netbridge`). The state directory, the database, the release
repository and the real home are not there. Without an isolating sandbox an episode refuses (`SandboxRefused`)
unless `sandbox.allow_unsandboxed`. The environment is emptied (no provider keys reach the agent), and the only
credential inside the root is the binding's token, minted for this one episode when it starts (`ModelBinding.mint`),
valid until its timeout and reaching only its scenario's `/v1/*` (`reef.core.episode_tokens`). The bridge
(`episode_bridge`) relays only `/v1/…` requests and puts that token and the scenario on each one, so an agent that
drops or swaps its token is still only the episode it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reef.core.episode_tokens import EPISODE_TOKEN_MARGIN_S
from reef.core.scenarios import Dialect
from reef.core.settings import Settings
from reef.harness.agent_checks import CheckResult, prepare_workspace, run_check
from reef.harness.agents import AGENTS, Agent, agent_env
from reef.harness.binding import ModelBinding
from reef.harness.chat import chat_harness_of
from reef.harness.render import render, write_files
from reef.harness.tree import HarnessTree
from reef.inference.base import Engine, RequestContext
from reef.learning.evaluation import answer_text
from reef.learning.evaluation.agent_tasks import AgentCheck, Workspace
from reef.sandbox.bubblewrap import bwrap_prefix, needed_by
from reef.sandbox.netbridge import FORWARDER, episode_bridge
from reef.sandbox.policy import choose_sandbox

STDERR_TAIL_CHARS = 4_000
FIRST_UNPRIVILEGED_PORT = 1024
SANDBOX_REEF_PORT = 8900  # where the agent finds Reef inside the sandbox when Reef's own port is below 1024


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeResult:
    """How one episode went; `residue` lists anything it left behind (empty when clean)."""

    answer: str
    exit_code: int | None
    timed_out: bool
    trajectory: list[dict[str, Any]]
    residue: list[str]
    sandboxed: bool
    duration_s: float
    stderr_tail: str = ""
    check: CheckResult | None = None  # an agent task's check, run after the agent

    @property
    def error(self) -> str | None:
        """Why the episode is an error rather than a score (it timed out or the agent failed), or None."""
        if self.timed_out:
            return "timed out"
        if self.exit_code != 0:
            return f"the agent exited with {self.exit_code}"
        return None


class AgentEpisodes:
    """Runs one agent's episodes (`agent`: an adapter name in `reef.harness.agents.AGENTS`), at most `max_parallel`
    at a time; `binary` defaults to the agent's own name on PATH."""

    def __init__(
        self,
        agent: str,
        binary: str | None = None,
        *,
        timeout_s: float = 120.0,
        max_parallel: int = 2,
        sandbox: bool | None = None,
        temp_dir: Path | None = None,
        allow_unsandboxed: bool = False,
    ) -> None:
        self.agent: Agent = AGENTS[agent]
        self.binary = shutil.which(binary or agent) or binary or agent
        self.timeout_s = timeout_s
        # None: bubblewrap, or a refusal where it cannot start (unless `allow_unsandboxed`); decided per run.
        self.sandbox = sandbox
        self.allow_unsandboxed = allow_unsandboxed
        self.temp_dir = temp_dir
        self._limit = asyncio.Semaphore(max_parallel)

    @classmethod
    def from_settings(cls, settings: Settings, agent: str = "pi") -> AgentEpisodes:
        """Timeout and parallelism from `settings.harness` (`episode_timeout_s`, `max_parallel_episodes`)."""
        harness = settings.harness
        return cls(
            agent,
            timeout_s=harness.episode_timeout_s,
            max_parallel=harness.max_parallel_episodes,
            allow_unsandboxed=settings.sandbox.allow_unsandboxed,
        )

    def sandboxed(self) -> bool:
        """Whether the next episode runs under bubblewrap; SandboxRefused when it may not run at all."""
        if self.sandbox is not None:
            return self.sandbox
        return choose_sandbox(self.allow_unsandboxed, "an agent episode")

    @staticmethod
    def available(binary: str = "pi") -> bool:
        return shutil.which(binary) is not None

    async def run_many(self, tree: HarnessTree, tasks: Sequence[str], binding: ModelBinding) -> list[EpisodeResult]:
        return list(await asyncio.gather(*(self.run(tree, task, binding) for task in tasks)))

    async def run(
        self,
        tree: HarnessTree,
        task: str,
        binding: ModelBinding,
        workspace: Workspace | None = None,
        check: AgentCheck | None = None,
    ) -> EpisodeResult:
        """One episode: the agent starts in `workspace`; `check` runs after it (not when the agent failed)."""
        sandbox = self.sandboxed()
        async with self._limit:
            binding = self._with_token(binding)  # minted now: an episode waiting its turn holds no live token
            root = Path(tempfile.mkdtemp(prefix="reef-episode-", dir=self.temp_dir))
            try:
                result = await self._run_in(root, tree, task, binding, workspace, sandbox)
                if check is not None and result.error is None:
                    checked = await run_check(root, root / "work", check, sandbox)
                    result = dataclasses.replace(result, check=checked)
                return result
            finally:
                shutil.rmtree(root, ignore_errors=True)

    def _with_token(self, binding: ModelBinding) -> ModelBinding:
        """The binding holding a token for this episode alone, valid until its timeout (when the binding mints)."""
        if binding.mint is None:
            return binding
        episode_id = binding.episode_id or uuid.uuid4().hex[:16]
        token = binding.mint(episode_id, self.timeout_s + EPISODE_TOKEN_MARGIN_S)
        return dataclasses.replace(binding, api_key=token, episode_id=episode_id)

    async def _run_in(
        self,
        root: Path,
        tree: HarnessTree,
        task: str,
        binding: ModelBinding,
        workspace: Workspace | None,
        sandbox: bool,
    ) -> EpisodeResult:
        work, home = root / "work", root / "home"
        for directory in (work, home, root / "tmp"):
            directory.mkdir()
        prepare_workspace(work, workspace)
        config_dir = self.agent.config_dir(root)
        config_dir.mkdir(parents=True, exist_ok=True)
        write_files(render(tree, self.agent.name), config_dir)
        endpoint = urllib.parse.urlsplit(binding.base_url)
        host, port = endpoint.hostname or "127.0.0.1", endpoint.port or (443 if endpoint.scheme == "https" else 80)
        inner = port if port >= FIRST_UNPRIVILEGED_PORT or not sandbox else SANDBOX_REEF_PORT
        if inner != port:  # the sandbox holds no capability to listen on a port below 1024: the agent uses another
            binding = dataclasses.replace(binding, base_url=endpoint._replace(netloc=f"{host}:{inner}").geturl())
        launch = self.agent.launch(root, self.binary, task, binding, tree)
        command, env = launch.command, {**agent_env(root), **launch.env}
        if not sandbox:
            return await self._execute(work, env, command, sandbox)
        (root / "forwarder.py").write_text(FORWARDER)
        socket_path = root / "reef.sock"
        forwarded = [sys.executable, str(root / "forwarder.py"), str(socket_path), str(inner), "--", *command]
        sandboxed = self._sandboxed(root, work, Path(self.binary).resolve().parent) + forwarded
        async with episode_bridge(socket_path, host, port, binding.api_key, binding.scenario):
            return await self._execute(work, env, sandboxed, sandbox)

    async def _execute(self, work: Path, agent_env: dict[str, str], command: list[str], sandbox: bool) -> EpisodeResult:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **agent_env}
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=work,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills every child too
        )
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), self.timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            stdout, stderr = await process.communicate()
        duration_s = time.monotonic() - started
        trajectory = parse_trajectory(stdout.decode("utf-8", "replace"))
        residue = _residue(process.pid)
        return EpisodeResult(
            answer=self.agent.final_answer(trajectory),
            exit_code=process.returncode,
            timed_out=timed_out,
            trajectory=trajectory,
            residue=residue,
            sandboxed=sandbox,
            duration_s=duration_s,
            stderr_tail=stderr.decode("utf-8", "replace")[-STDERR_TAIL_CHARS:],
        )

    def _sandboxed(self, root: Path, work: Path, binary_dir: Path) -> list[str]:
        return bwrap_prefix(root, work, [*needed_by(binary_dir), *self.agent.runtime_paths(self.binary)])


async def chat_episode(engine: Engine, tree: HarnessTree, task: str, binding: ModelBinding) -> EpisodeResult:
    """A `chat` episode: one request through the engine with the tree as system prompt (nothing recorded)."""
    started = time.monotonic()
    body: dict[str, Any] = {"model": binding.model, "messages": [{"role": "user", "content": task}]}
    if binding.max_tokens:
        body["max_tokens"] = binding.max_tokens
    chat = chat_harness_of(tree)
    ctx = RequestContext(binding.scenario, system_prompt=chat.system_prompt, example_turns=chat.example_turns)
    completion = await engine.complete(Dialect.CHAT, body, ctx)
    answer = answer_text(completion.body) if completion.status < 400 else ""
    trajectory: list[dict[str, Any]] = [
        {"request": body, "system_prompt": ctx.system_prompt},
        {"response": completion.body},
    ]
    return EpisodeResult(answer, 0, False, trajectory, [], False, time.monotonic() - started)


class PiEpisodes(AgentEpisodes):
    """pi's episodes (`binary` defaults to `pi` on PATH)."""

    def __init__(self, binary: str = "pi", **options: Any) -> None:
        super().__init__("pi", binary, **options)


def parse_trajectory(stdout: str) -> list[dict[str, Any]]:
    """An agent's JSON events, one JSON object a line (other lines are skipped)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _residue(pid: int) -> list[str]:
    """What the episode left running (its process group), before the root is removed."""
    found = []
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        pass
    except PermissionError:
        found.append(f"process group {pid} still exists")
    else:
        _kill_group(pid)
        found.append(f"process group {pid} outlived the agent (killed)")
    return found
