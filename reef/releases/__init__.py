"""Versioned releases: the `ReleaseStore` contract, the git-backed chain and the learner's commit log."""

from reef.releases.base import CommitLog, ReleaseStore
from reef.releases.commit_log import FileCommitLog
from reef.releases.git import GitReleaseStore, open_release_store

__all__ = ["CommitLog", "FileCommitLog", "GitReleaseStore", "ReleaseStore", "open_release_store"]
