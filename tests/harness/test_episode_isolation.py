"""An agent episode sees neither the state directory nor the database nor the real home, and refuses to run
without an isolating sandbox."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from reef.harness.episodes import ModelBinding, PiEpisodes
from reef.harness.tree import HarnessTree
from reef.sandbox import Isolation, SandboxRefused, isolation, policy

BINDING = ModelBinding("http://127.0.0.1:9", "isolation", "m", api_key="k")


@pytest.mark.skipif(not isolation().available, reason="no isolating sandbox (bubblewrap) here")
async def test_a_sandboxed_episode_cannot_read_the_state_directory_or_the_database(fake_pi, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    database = state / "records.db"
    with sqlite3.connect(database) as connection:
        connection.execute("create table secrets (value text)")
    (state / "releases.git").mkdir()
    (state / "releases.git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "episodes").mkdir()
    readable = tmp_path / "bin" / "pi"  # the agent's own install directory stays visible
    paths = [database, state / "releases.git" / "HEAD", readable]
    result = await PiEpisodes(fake_pi, timeout_s=30, temp_dir=tmp_path / "episodes").run(
        HarnessTree(), "read:" + ",".join(map(str, paths)), BINDING
    )
    assert result.exit_code == 0 and result.sandboxed, result.stderr_tail
    said = json.dumps(result.trajectory)
    assert f"{database}=hidden" in said and f"{state / 'releases.git' / 'HEAD'}=hidden" in said
    assert f"{readable}=read" in said


async def test_without_an_isolating_sandbox_an_episode_refuses(fake_pi, tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "isolation", lambda: Isolation(False, "bwrap (bubblewrap) is not installed"))
    with pytest.raises(SandboxRefused, match="sandbox.allow_unsandboxed"):
        await PiEpisodes(fake_pi, timeout_s=30, temp_dir=tmp_path).run(HarnessTree(), "hello", BINDING)
    allowed = PiEpisodes(fake_pi, timeout_s=30, temp_dir=tmp_path, allow_unsandboxed=True)
    result = await allowed.run(HarnessTree(), "hello", BINDING)
    assert result.exit_code == 0 and not result.sandboxed


def test_the_real_home_is_never_bound(tmp_path: Path) -> None:
    from reef.sandbox import bwrap_prefix

    argv = bwrap_prefix(tmp_path, tmp_path, [Path.home(), Path("/")])
    bound = {argv[i + 1] for i, word in enumerate(argv) if word == "--ro-bind"}
    assert str(Path.home().resolve()) not in bound and "/" not in bound
