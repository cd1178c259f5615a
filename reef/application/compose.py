"""The composition root: open the engine, the stores and the coordination `settings` name, and build the runtime
on them. `reef serve` calls `build_runtime`, then hands the runtime to the HTTP edge."""

from __future__ import annotations

import logging
from pathlib import Path

from reef.application.config import ConfigError
from reef.application.runtime import Runtime
from reef.coordination.election import Election, FileElection
from reef.coordination.hints import NoHints, ReleaseHints
from reef.core.private_files import private_directory
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.releases.base import CommitLog
from reef.releases.commit_log import FileCommitLog

log = logging.getLogger(__name__)


def build_runtime(settings: Settings, writer_fd: int | None = None) -> Runtime:
    """Open every part `settings` names and return the runtime on them (not started); `writer_fd`: a worker's
    channel to the supervisor's record writer (`--reef.workers N`)."""
    from reef.releases.git import open_release_store
    from reef.storage.sql import open_record_store

    storage = settings.storage
    private_directory(storage.dir)
    engine = open_engine(settings)
    records = open_record_store(
        storage.record_backend,
        directory=storage.dir,
        database_url=storage.record_database_url,
        writer_fd=writer_fd,
    )
    releases = open_release_store(storage.release_repository_location(), storage.dir / "release-cache")
    election, hints, commits = open_coordination(settings)
    return Runtime(settings, records, releases, commits, engine, election=election, hints=hints)


def open_engine(settings: Settings) -> Engine:
    """The inference engine `inference.*` names: an upstream proxy, a launched vLLM / SGLang, or a local model."""
    backend = settings.inference.resolved_backend()
    if backend == "upstream":
        if not settings.inference.upstream_url:
            raise ConfigError("inference.upstream_url: required when inference.backend is upstream")
        from reef.inference.upstream import UpstreamEngine

        return UpstreamEngine(settings.inference)
    if backend in ("vllm", "sglang"):
        from reef.inference.launch import launched_engine

        launched: Engine = launched_engine(settings.inference)
        return launched
    if not settings.inference.model_path:
        raise ConfigError(
            "inference.model_path: set an upstream (--inference.upstream-url URL) or a local model "
            "(--inference.model-path smollm2)"
        )
    model_path = settings.inference.model_path
    if model_path != "smollm2" and not Path(model_path).expanduser().exists():
        raise ConfigError(
            f"inference.model_path: no model at {model_path!r} (a model directory, a .gguf file or 'smollm2')"
        )
    from reef.inference.local import LocalEngine

    return LocalEngine(settings.inference)


def open_coordination(settings: Settings) -> tuple[Election, ReleaseHints, CommitLog]:
    """The election, release hints and commit log the record store's backend calls for.

    PostgreSQL (replicas on many machines): advisory-lock elections, LISTEN/NOTIFY hints and the commit log in the
    database, all keyed by the database URL (so the replicas of one deployment must use the same URL). SQLite (one
    machine; one process or `--reef.workers N`): file-lock elections under `<storage.dir>/leaders`, polling only,
    the commit log as files under `<storage.dir>/commits`.
    """
    storage, replica_id = settings.storage, settings.reef.replica_id
    if storage.record_backend == "postgres" and storage.record_database_url:
        import sqlalchemy as sa

        from reef.coordination.election import PostgresElection
        from reef.coordination.hints import PostgresReleaseHints
        from reef.releases.sql_commit_log import SqlCommitLog
        from reef.storage.sql import libpq_url, postgres_engine

        deployment = sa.make_url(storage.record_database_url).render_as_string(hide_password=True)
        url = libpq_url(storage.record_database_url)
        commits = SqlCommitLog(postgres_engine(storage.record_database_url, None, 2))
        if (storage.dir / "commits").is_dir():  # steps logged to files before the log moved into the database
            for scenario in commits.adopt(FileCommitLog(storage.dir / "commits")):
                log.warning("commit log of %s copied from %s into the database", scenario, storage.dir / "commits")
        return PostgresElection(url, deployment, replica_id), PostgresReleaseHints(url, deployment), commits
    return FileElection(storage.dir / "leaders", replica_id), NoHints(), FileCommitLog(storage.dir / "commits")
