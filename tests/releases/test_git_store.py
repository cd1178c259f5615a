"""What the git release store adds to the contract: readable history, plumbing only, LFS, real crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reef.releases import GitReleaseStore, open_release_store
from reef.releases.content import content_id_of_directory
from reef.releases.git import FAULT_ENV
from reef.releases.lfs import lfs_installed

ROOT = Path(__file__).resolve().parents[2]


def git(repository: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repository}", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "releases.git"


@pytest.fixture
def local_store(repo_path: Path, tmp_path: Path) -> GitReleaseStore:
    return GitReleaseStore(str(repo_path), tmp_path / "work")


def test_the_factory_creates_a_missing_bare_repository_without_a_working_tree(repo_path, tmp_path):
    store = open_release_store(str(repo_path), tmp_path / "work")
    assert isinstance(store, GitReleaseStore)
    assert git(repo_path, "rev-parse", "--is-bare-repository").strip() == "true"


def test_git_log_shows_the_chain_with_readable_messages(local_store, repo_path, content):
    first = local_store.publish("demo", content("v1", {"a": "1"}), None, operation="creation", recipe="sft")
    second = local_store.publish(
        "demo", content("v2", {"a": "2"}), first.release_id, step=3, recipe="sft", metrics={"exact_match": 0.4}
    )
    local_store.republish("demo", first.release_id, "rollback")
    log = git(repo_path, "log", "--format=%H %s%n%b", "refs/reef/scenarios/demo/head")
    subjects = [
        line for line in log.splitlines() if line[:40] in {first.release_id, second.release_id} or "rollback" in line
    ]
    assert "scenario demo: rollback to" in subjects[0]
    assert f"{second.release_id} scenario demo: training step 3 (published)" in log
    assert f"{first.release_id} scenario demo: creation (published)" in log
    assert "exact_match: 0.4" in log
    parents = git(repo_path, "rev-list", "--parents", "refs/reef/scenarios/demo/head").splitlines()
    assert len(parents) == 3
    assert parents[1].split() == [second.release_id, first.release_id]


def test_each_release_commit_holds_the_content_and_a_manifest(local_store, repo_path, content):
    tree = content("v1", {"AGENTS.md": "rules", "skills/x/SKILL.md": "x"})
    release = local_store.publish("demo", tree, None, metrics={"score": 1})
    files = git(repo_path, "ls-tree", "-r", "--name-only", release.release_id).split()
    assert sorted(files) == ["AGENTS.md", "reef-release.json", "skills/x/SKILL.md"]
    manifest = git(repo_path, "show", f"{release.release_id}:reef-release.json")
    assert release.content_id in manifest
    assert release.release_id not in manifest


@pytest.mark.skipif(not lfs_installed(), reason="git-lfs is not installed")
@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_weight_files_go_through_git_lfs(remote, tmp_path, content):
    repository = tmp_path / "releases.git"
    if remote:
        subprocess.run(["git", "init", "--quiet", "--bare", str(repository)], check=True)
    store = GitReleaseStore(repository.as_uri() if remote else str(repository), tmp_path / "work")
    weights = os.urandom(64 * 1024)
    tree = content("adapter", {"adapter_model.safetensors": weights, "adapter_config.json": "{}"})
    release = store.publish("demo", tree, None)
    blob = git(repository, "show", f"{release.release_id}:adapter_model.safetensors")
    assert blob.startswith("version https://git-lfs.github.com/spec/v1")
    assert "filter=lfs" in git(repository, "show", f"{release.release_id}:.gitattributes")
    oid = blob.split("oid sha256:")[1].split()[0]
    assert (repository / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).read_bytes() == weights
    assert git(repository, "show", f"{release.release_id}:adapter_config.json") == "{}"
    fresh = GitReleaseStore(store.repository, tmp_path / "elsewhere")
    assert (fresh.materialize(release) / "adapter_model.safetensors").read_bytes() == weights


_PUBLISHER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from reef.releases import GitReleaseStore
    store = GitReleaseStore(sys.argv[1], Path(sys.argv[2]))
    parent = store.head("demo").release_id
    for step in range(1, 10_000):
        content = Path(sys.argv[3]) / str(step % 2)
        parent = store.publish("demo", content, parent, step=step).release_id
        print(parent, flush=True)
    """
)


def _run_publisher(repo_path: Path, tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _PUBLISHER, str(repo_path), str(tmp_path / "work-child"), str(tmp_path / "content")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


@pytest.mark.parametrize(
    ("stage", "moved"), [("objects-written", False), ("before-ref-update", False), ("ref-updated", True)]
)
def test_a_publish_killed_with_sigkill_between_steps_leaves_the_old_or_the_new_head(
    stage, moved, local_store, repo_path, tmp_path, content
):
    for variant in ("0", "1"):
        content(variant, {"a": variant, "weights.bin": variant.encode() * 1000})
    first = local_store.publish("demo", tmp_path / "content" / "0", None)
    child = _run_publisher(repo_path, tmp_path, {FAULT_ENV: stage})
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    head = local_store.head("demo")
    if moved:
        assert head.parent_release_id == first.release_id
        assert head.content_id == content_id_of_directory(tmp_path / "content" / "1")
    else:
        assert head == first
    assert content_id_of_directory(local_store.materialize(head)) == head.content_id
    git(repo_path, "fsck", "--no-dangling")


def test_a_publisher_killed_at_an_arbitrary_moment_leaves_a_whole_release_serving(
    local_store, repo_path, tmp_path, content
):
    for variant in ("0", "1"):
        content(variant, {"a": variant, "nested/b.txt": variant * 100})
    local_store.publish("demo", tmp_path / "content" / "0", None)
    child = _run_publisher(repo_path, tmp_path, {})
    assert child.stdout is not None
    announced = [child.stdout.readline().strip() for _ in range(3)]
    time.sleep(0.01)  # land somewhere inside a later publish; where exactly does not matter
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=60)
    announced += rest.split()
    head = local_store.head("demo")
    # The head is the last announced release, or one published just before the kill landed (its parent).
    assert head.release_id == announced[-1] or head.parent_release_id == announced[-1]
    assert content_id_of_directory(local_store.materialize(head)) == head.content_id
    git(repo_path, "fsck", "--no-dangling")


_RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from reef.core.errors import Conflict
    from reef.releases import GitReleaseStore
    store = GitReleaseStore(sys.argv[1], Path(sys.argv[2]))
    parent = store.head("demo").release_id
    Path(sys.argv[4] + "-ready-" + sys.argv[5]).touch()
    while not Path(sys.argv[4]).exists():
        time.sleep(0.001)
    try:
        store.publish("demo", Path(sys.argv[3]), parent, step=1)
        print("won")
    except Conflict:
        print("conflict")
    """
)


def test_of_two_publisher_processes_on_the_same_parent_exactly_one_wins(local_store, repo_path, tmp_path, content):
    local_store.publish("demo", content("base", {"a": "0"}), None)
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RACER,
                str(repo_path),
                str(tmp_path / f"w{i}"),
                str(content(f"r{i}", {"a": str(i)})),
                str(go),
                str(i),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for i in range(2)
    ]
    # Both must have read the head before either publishes; then they start together.
    while not all(Path(f"{go}-ready-{i}").exists() for i in range(2)):
        assert all(racer.poll() is None for racer in racers)
        time.sleep(0.01)
    go.touch()
    outcomes = sorted(racer.communicate(timeout=60)[0].strip() for racer in racers)
    assert outcomes == ["conflict", "won"]
    assert len(local_store.list("demo")) == 2


def test_a_cache_entry_left_incomplete_by_a_crash_is_rewritten(local_store, repo_path, tmp_path, content):
    release = local_store.publish("demo", content("v1", {"a.txt": "whole", "b/c.txt": "also whole"}), None)
    directory = local_store.materialize(release)
    broken = directory / "b" / "c.txt"
    broken.chmod(0o644)
    broken.write_text("")  # what a power loss can leave of an unsynced file
    restarted = GitReleaseStore(str(repo_path), tmp_path / "work")
    assert restarted.materialize(release) == directory
    assert (directory / "b" / "c.txt").read_text() == "also whole"
    assert content_id_of_directory(directory) == release.content_id
