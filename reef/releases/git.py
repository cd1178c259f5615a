"""`GitReleaseStore`: each scenario's releases as a chain of commits in a bare git repository.

Layout: `refs/reef/scenarios/<scenario>/head` is the serving release; `refs/reef/pending/<scenario>/<id>` keeps
pending (review-mode) releases stored but unserved; `refs/reef/lineage/<scenario>` is the tip of the working
lineage (a candidate that tied its gate, stored unserved and unlisted, which the next step trains from);
`refs/reef/archive/<scenario>-<stamp>/…` keeps the refs of a deleted scenario. Each release is one commit, written
with plumbing only (`git_objects`). The head moves by compare-and-swap (`update-ref <ref> <new> <old>`, or
`push --force-with-lease=<ref>:<old>` to a remote), so of two publishers on the same parent exactly one wins,
and a publish killed at any point leaves the head on the old or the new release. With a remote repository,
`work_dir/mirror.git` is a local bare mirror: fetched before each read, objects pushed before the ref.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reef.core.errors import Conflict, NotFound, ReefError
from reef.core.releases import Release, ReleaseOperation
from reef.core.scenarios import validate_scenario_name
from reef.releases import names
from reef.releases.base import ReleaseStore
from reef.releases.content import MANIFEST_NAME, scan_content
from reef.releases.git_command import ZERO_ID, GitError, GitRepository
from reef.releases.git_objects import commit_tree, manifest_bytes, new_manifest, release_of, step_source, write_tree
from reef.releases.lfs import LfsObjects, lfs_installed
from reef.releases.materialize import materialize_commit

FAULT_ENV = "REEF_RELEASES_FAULT"  # names a publish stage at which the process SIGKILLs itself (crash tests)
_RELEASE_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REMOTE = re.compile(r"^[a-z][a-z0-9+.-]*://|^[\w.-]+@[\w.-]+:")
_FETCH_ATTEMPTS = 5


def is_remote_repository(repository: str) -> bool:
    """A URL (`file://`, `ssh://`, `https://`, `user@host:path`) rather than a local path."""
    return bool(_REMOTE.match(repository))


class GitReleaseStore(ReleaseStore):
    """The git-backed `ReleaseStore`; `repository` is a local bare repo path (created if missing) or a remote URL."""

    def __init__(self, repository: str = "./.reef/releases.git", work_dir: Path = Path(".reef/work")) -> None:
        self.repository = repository
        self.work_dir = Path(work_dir).absolute()
        self.remote = repository if is_remote_repository(repository) else None
        git_dir = self.work_dir / "mirror.git" if self.remote else Path(repository).absolute()
        self.git = GitRepository(git_dir)
        settings = {
            # Objects and refs are fsync'd: a published release survives power loss.
            "core.fsync": "committed,reference",
            "core.fsyncMethod": "batch",  # one disk flush per git command for loose objects
            # git waits this long for a ref lock held by a concurrent update before giving up (then: Conflict).
            "core.filesRefLockTimeout": "2000",
            # Releases are referenced only by refs/reef/*; never let gc prune one that was just written.
            "gc.pruneExpire": "never",
        }
        if self.remote:
            settings["remote.origin.url"] = self.remote
        self.git.init_bare(settings)
        self.lfs = LfsObjects(git_dir)
        self.use_lfs = lfs_installed()
        # Called with a stage name between a publish's steps; tests raise or kill there to inject a crash.
        self._fault_hook: Callable[[str], None] | None = None
        self._manifests: dict[str, dict[str, Any]] = {}  # commit id -> manifest; commits are immutable
        self._fetch_lock = threading.Lock()
        self._materialized: set[str] = set()

    # ---- reading -------------------------------------------------------------------------------------------
    def head(self, scenario: str) -> Release | None:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        release_id = self.git.resolve(names.head_ref(scenario))
        return self._release(release_id) if release_id else None

    def head_ids(self, scenarios: Sequence[str]) -> dict[str, str | None]:
        self._sync()
        listing = self.git.text("for-each-ref", "--format=%(refname) %(objectname)", names.SCENARIOS_NAMESPACE + "/")
        found = {}
        for line in listing.splitlines():
            ref, _, object_id = line.partition(" ")
            encoded, _, last = ref[len(names.SCENARIOS_NAMESPACE) + 1 :].rpartition("/")
            if last == "head":
                found[names.decode_name(encoded)] = object_id
        return {scenario: found.get(scenario) for scenario in scenarios}

    def get(self, scenario: str, release_id: str) -> Release:
        for release in self.list(scenario):
            if release.release_id == release_id:
                return release
        raise NotFound(f"scenario {scenario!r} has no release {release_id!r}")

    def list(self, scenario: str) -> list[Release]:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        listing = self.git.text(
            "rev-list",
            "--topo-order",
            f"--glob={names.scenario_prefix(scenario)}/*",
            f"--glob={names.pending_prefix(scenario)}/*",
        )
        commit_ids = listing.split()
        self._load_manifests(commit_ids)
        releases = [self._release(commit_id) for commit_id in commit_ids]
        # Stable sort: releases created in the same instant keep git's child-before-parent order.
        return sorted(releases, key=lambda r: r.created_at, reverse=True)

    # ---- writing -------------------------------------------------------------------------------------------
    def publish(
        self,
        scenario: str,
        content: Path,
        parent_release_id: str | None,
        *,
        operation: ReleaseOperation = "training",
        step: int = 0,
        recipe: str = "",
        metrics: dict[str, Any] | None = None,
        pending: bool = False,
        consumed_record_ids: Sequence[str] | None = None,
        trained_from: str | None = None,
    ) -> Release:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        current = self.git.resolve(names.head_ref(scenario))
        if pending:
            if parent_release_id is not None:
                self.get(scenario, parent_release_id)  # NotFound for a parent from elsewhere
        elif current != parent_release_id:
            raise Conflict(f"scenario {scenario!r} serves {current}, not the expected parent {parent_release_id}")
        source = step_source(consumed_record_ids, trained_from=trained_from)
        commit_id, manifest = self._write_release(
            scenario, content, parent_release_id, operation, step, recipe, metrics, source, pending=pending
        )
        self._fault("before-ref-update")
        if pending:
            self._move_ref(names.pending_ref(scenario, commit_id), commit_id, None)
        else:
            self._move_ref(names.head_ref(scenario), commit_id, current)
        self._fault("ref-updated")
        self._manifests[commit_id] = manifest
        return self._release(commit_id)

    def keep_lineage(
        self,
        scenario: str,
        content: Path,
        parent_release_id: str,
        *,
        step: int,
        recipe: str = "",
        metrics: dict[str, Any] | None = None,
        lineage_base: str,
        consumed_record_ids: Sequence[str],
    ) -> Release:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        tip = self.git.resolve(names.lineage_ref(scenario))
        source = step_source(consumed_record_ids, lineage_base=lineage_base)
        commit_id, manifest = self._write_release(
            scenario, content, parent_release_id, "training", step, recipe, metrics, source, lineage=True
        )
        self._move_ref(names.lineage_ref(scenario), commit_id, tip)
        self._fault("lineage-kept")
        self._manifests[commit_id] = manifest
        return self._release(commit_id)

    def lineage(self, scenario: str) -> Release | None:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        tip = self.git.resolve(names.lineage_ref(scenario))
        return self._release(tip) if tip else None

    def drop_lineage(self, scenario: str) -> None:
        validate_scenario_name(scenario, field="scenario")
        self._sync()
        ref = names.lineage_ref(scenario)
        tip = self.git.resolve(ref)
        if tip is None:
            return
        if self.remote:
            self._push([f"--force-with-lease={ref}:{tip}"], [f":{ref}"])
        self.git.run("update-ref", "-d", ref, tip, check=False)

    def _write_release(
        self,
        scenario: str,
        content: Path,
        parent_release_id: str | None,
        operation: ReleaseOperation,
        step: int,
        recipe: str,
        metrics: dict[str, Any] | None,
        source: dict[str, Any],
        *,
        pending: bool = False,
        lineage: bool = False,
    ) -> tuple[str, dict[str, Any]]:
        """Write the objects of a release (its commit included) without moving any ref."""
        files = scan_content(Path(content))
        release = (scenario, files, parent_release_id, operation, step, recipe, metrics)
        manifest = new_manifest(*release, source=source, pending=pending, lineage=lineage)
        tree_id, lfs_oids = write_tree(self.git, self.lfs if self.use_lfs else None, files, manifest)
        commit_id = commit_tree(self.git, tree_id, parent_release_id, manifest)
        self._fault("objects-written")
        if self.remote and lfs_oids:
            self.git.run("lfs", "push", "--object-id", "origin", *lfs_oids)
        return commit_id, manifest

    def republish(self, scenario: str, release_id: str, operation: ReleaseOperation) -> Release:
        source = self.get(scenario, release_id)  # syncs; NotFound for unknown ids
        current = self.git.resolve(names.head_ref(scenario))
        if current == release_id:
            raise Conflict(f"release {release_id} already serves scenario {scenario!r}")
        manifest = {
            **self._manifests[release_id],
            "parent_release_id": current,
            "operation": operation,
            "created_at": time.time(),
            "pending": False,
            "source_release_id": source.release_id,
        }
        # The same tree with only the manifest replaced: no content is hashed or copied again.
        root = self.git.run("ls-tree", "-z", release_id).stdout.decode()
        manifest_blob = self.git.text("hash-object", "-w", "--stdin", input=manifest_bytes(manifest))
        entries = [e for e in root.split("\0") if e and e.split("\t", 1)[1] != MANIFEST_NAME]
        entries.append(f"100644 blob {manifest_blob}\t{MANIFEST_NAME}")
        tree_id = self.git.text("mktree", "-z", input="".join(f"{e}\0" for e in entries).encode())
        commit_id = commit_tree(self.git, tree_id, current, manifest)
        self._fault("objects-written")
        self._move_ref(names.head_ref(scenario), commit_id, current)
        self._manifests[commit_id] = manifest
        return self._release(commit_id)

    def materialize(self, release: Release) -> Path:
        cached = self.work_dir / "releases" / release.release_id
        if release.release_id in self._materialized and cached.is_dir():
            return cached
        if not _RELEASE_ID.fullmatch(release.release_id):
            raise NotFound(f"no release {release.release_id!r}")
        if not self.git.has_object(release.release_id):
            self._sync()
            if not self.git.has_object(release.release_id):
                raise NotFound(f"no release {release.release_id!r}")
        try:
            self._load_manifests([release.release_id])
        except GitError:  # an object of the repository, but not a release commit
            raise NotFound(f"no release {release.release_id!r}")
        path = materialize_commit(
            self.git,
            self.lfs,
            release.release_id,
            self._manifests[release.release_id],
            self.work_dir / "releases",
            self._fetch_lfs,
        )
        self._materialized.add(release.release_id)  # checked once per process; later calls trust it
        return path

    def archive(self, scenario: str) -> str | None:
        """Move the scenario's head and pending refs under `refs/reef/archive/<scenario>-<stamp>/`.

        Returns the archive prefix (holding `head` and `pending/<release id>`), or None when the scenario had
        no releases. History stays in the repository.
        """
        validate_scenario_name(scenario, field="scenario")
        self.drop_lineage(scenario)
        listing = self.git.text(
            "for-each-ref",
            "--format=%(objectname) %(refname)",
            names.scenario_prefix(scenario) + "/",
            names.pending_prefix(scenario) + "/",
        )
        refs = [line.split(" ", 1) for line in listing.splitlines() if line]
        if not refs:
            return None
        prefix = names.archive_prefix(scenario, datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ"))
        # …/<scenario>/head -> <prefix>/head and …/<scenario>/<release id> -> <prefix>/pending/<release id>
        moved_names = {names.scenario_prefix(scenario): "", names.pending_prefix(scenario): "pending/"}
        moves = [
            (object_id, ref, f"{prefix}/{moved_names[ref.rsplit('/', 1)[0]]}{ref.rsplit('/', 1)[1]}")
            for object_id, ref in refs
        ]
        if self.remote:
            leases = [f"--force-with-lease={ref}:{object_id}" for object_id, ref, _ in moves]
            specs = [spec for object_id, ref, new in moves for spec in (f"{object_id}:{new}", f":{ref}")]
            self._push(["--atomic", *leases], specs)
            self._sync()
        else:
            script = "".join(f"create {new} {oid}\ndelete {ref} {oid}\n" for oid, ref, new in moves)
            done = self.git.run("update-ref", "--stdin", input=script.encode(), check=False)
            if done.returncode != 0:
                raise Conflict(f"scenario {scenario!r} changed while being archived: {done.stderr.decode()[:300]}")
        return prefix

    # ---- internals -----------------------------------------------------------------------------------------
    def _move_ref(self, ref: str, new_id: str, expected_id: str | None) -> None:
        """Point `ref` at `new_id` iff it is at `expected_id` (None: iff it does not exist); else Conflict."""
        if self.remote:
            self._push([f"--force-with-lease={ref}:{expected_id or ''}"], [f"{new_id}:{ref}"])
            # The remote is the truth; if a concurrent fetch holds the mirror's ref lock, the next fetch catches up.
            self.git.run("update-ref", ref, new_id, check=False)
            return
        done = self.git.run("update-ref", "-m", "reef publish", ref, new_id, expected_id or ZERO_ID, check=False)
        if done.returncode != 0:
            stderr = done.stderr.decode(errors="replace")
            if "cannot lock ref" in stderr:
                raise Conflict(f"{ref} moved concurrently (expected {expected_id}): {stderr.strip()[:300]}")
            raise GitError(["update-ref", ref], done.returncode, stderr)

    def _push(self, options: Sequence[str], refspecs: Sequence[str]) -> None:
        done = self.git.run("push", "--porcelain", "--no-verify", *options, "origin", *refspecs, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace")
            # stale info / rejected: the lease failed before sending; cannot lock ref: the remote's own CAS failed
            if any(sign in output for sign in ("stale info", "[rejected]", "fetch first", "cannot lock ref")):
                raise Conflict(f"the remote release ref moved concurrently: {output.strip()[:300]}")
            raise GitError(["push", *refspecs], done.returncode, output)

    def _sync(self) -> None:
        """With a remote: mirror its refs/reef/* (pruning archived or deleted refs) before reading."""
        if not self.remote:
            return
        with self._fetch_lock:
            for attempt in range(_FETCH_ATTEMPTS):
                done = self.git.run(
                    "fetch", "--quiet", "--prune", "--no-tags", "origin", "+refs/reef/*:refs/reef/*", check=False
                )
                if done.returncode == 0:
                    return
                if attempt == _FETCH_ATTEMPTS - 1:  # another process sharing this mirror may hold a ref lock
                    raise GitError(["fetch", "origin"], done.returncode, done.stderr.decode(errors="replace"))
                time.sleep(0.05 * (attempt + 1))

    def _fetch_lfs(self, commit_id: str) -> None:
        if not self.remote:
            raise ReefError(f"release {commit_id} lacks LFS objects in {self.git.git_dir}/lfs/objects")
        self.git.run("lfs", "fetch", "origin", commit_id)

    def _load_manifests(self, commit_ids: Sequence[str]) -> None:
        missing = [c for c in commit_ids if c not in self._manifests]
        blobs = self.git.read_blobs([f"{c}:{MANIFEST_NAME}" for c in missing])
        for commit_id, blob in zip(missing, blobs, strict=True):
            self._manifests[commit_id] = json.loads(blob)

    def _release(self, commit_id: str) -> Release:
        self._load_manifests([commit_id])
        return release_of(commit_id, self._manifests[commit_id])

    def _fault(self, stage: str) -> None:
        if os.environ.get(FAULT_ENV) == stage:
            os.kill(os.getpid(), signal.SIGKILL)
        if self._fault_hook is not None:
            self._fault_hook(stage)


def open_release_store(repository: str, work_dir: Path) -> ReleaseStore:
    """The release store for `repository` (a local bare repo path or a remote URL); `work_dir` holds caches."""
    return GitReleaseStore(repository, work_dir)
