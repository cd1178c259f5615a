"""Versioned releases: the `ReleaseStore` contract, the git-backed chain and the learner's commit log."""

from reef.releases.base import CommitLog, ReleaseStore

__all__ = ["CommitLog", "ReleaseStore"]
