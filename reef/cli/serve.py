"""`reef serve`: open the stores and the engine named by the settings, then run the HTTP service."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reef.application.config import ConfigError, describe_settings, load_settings, parse_overrides
from reef.application.exposure import startup_warnings
from reef.core.errors import BadRequest
from reef.core.settings import Settings
from reef.learning.recipe_config import resolved_rows
from reef.learning.recipes_registry import recipe_class
from reef.observability import tracing

log = logging.getLogger(__name__)


def add_serve_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the Reef HTTP service",
        description=(
            "Run the Reef service. Settings come from defaults, environment fallbacks (REEF_TOKEN, REEF_ADMIN_TOKEN, "
            "REEF_UPSTREAM_URL, REEF_UPSTREAM_MODEL, REEF_UPSTREAM_API_KEY, REEF_DATABASE_URL), the YAML file "
            "given with -c, and dotted flags such as --reef.port 8900 or --inference.upstream-url URL "
            "(later layers win). Every key: docs/reference/configuration.md."
        ),
    )
    parser.add_argument("-c", "--config", type=Path, help="YAML settings file")
    parser.add_argument("--print-config", action="store_true", help="print every resolved value and its source")
    parser.set_defaults(handler=run_serve, takes_overrides=True)


def resolve(args: argparse.Namespace, extra: list[str]) -> tuple[Settings, dict[str, str]]:
    try:
        return load_settings(args.config, parse_overrides(extra))
    except ConfigError as exc:
        print(f"reef: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2)


def print_config(settings: Settings, sources: dict[str, str]) -> None:
    table = Table(title="Reef configuration", show_lines=False)
    for column in ("key", "value", "source"):
        table.add_column(column)
    for key, value, source in describe_settings(settings, sources):
        table.add_row(key, value, source)
    # The recipe's configuration key by key, defaults filled in (already validated by the startup checks).
    given_by = sources.get("learning.recipe_config", "default")
    model = recipe_class(settings.learning.recipe).config_model
    for name, value, given in resolved_rows(model, settings.learning.recipe_config):
        table.add_row(f"learning.recipe-config.{name}", json.dumps(value), given_by if given else "default")
    Console(width=140).print(table)


def open_engine(settings: Settings) -> Any:
    backend = settings.inference.resolved_backend()
    if backend == "upstream":
        if not settings.inference.upstream_url:
            raise ConfigError("inference.upstream_url: required when inference.backend is upstream")
        from reef.inference.upstream import UpstreamEngine

        return UpstreamEngine(settings.inference)
    if backend in ("vllm", "sglang"):
        from reef.inference.launch import launched_engine

        return launched_engine(settings.inference)
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


def build_app(settings: Settings) -> Any:
    """Open every part named by `settings` and return the ASGI app."""
    from reef.application.runtime import Runtime
    from reef.cli.workers import shared_writer_fd
    from reef.core.private_files import private_directory
    from reef.releases.git import open_release_store
    from reef.service.app import create_app
    from reef.storage.sql import open_record_store

    storage = settings.storage
    private_directory(storage.dir)
    engine = open_engine(settings)
    records = open_record_store(
        storage.record_backend,
        directory=storage.dir,
        database_url=storage.record_database_url,
        writer_fd=shared_writer_fd(),
    )
    releases = open_release_store(storage.release_repository_location(), storage.dir / "release-cache")
    election, hints, commits = open_coordination(settings)
    runtime = Runtime(settings, records, releases, commits, engine, election=election, hints=hints)
    return create_app(settings, runtime, records, engine)


def open_coordination(settings: Settings) -> tuple[Any, Any, Any]:
    """The election, release hints and commit log the record store's backend calls for.

    PostgreSQL (replicas on many machines): advisory-lock elections, LISTEN/NOTIFY hints and the commit log in the
    database, all keyed by the database URL (so the replicas of one deployment must use the same URL). SQLite (one
    machine; one process or `--reef.workers N`): file-lock elections under `<storage.dir>/leaders`, polling only,
    the commit log as files under `<storage.dir>/commits`.
    """
    from reef.coordination.election import FileElection, PostgresElection
    from reef.coordination.hints import NoHints, PostgresReleaseHints
    from reef.releases.commit_log import FileCommitLog

    storage, replica_id = settings.storage, settings.reef.replica_id
    if storage.record_backend == "postgres" and storage.record_database_url:
        import sqlalchemy as sa

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


def run_serve(args: argparse.Namespace, extra: list[str]) -> int:
    settings, sources = resolve(args, extra)
    from reef.application.startup import check_startup

    try:  # in their documented order, before any engine, model or store is opened
        check_startup(settings)
    except ConfigError as exc:
        print(f"reef: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print_config(settings, sources)
        return 0
    logging.basicConfig(level=settings.reef.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from reef.cli.workers import Supervisor, is_worker

    if settings.reef.workers > 1 and not is_worker():
        argv = (["-c", str(args.config)] if args.config else []) + list(extra)
        return Supervisor(settings, argv).run()
    try:
        # Before anything is opened: a tracing setting that cannot work stops the start, as any bad setting does.
        traced = tracing.configure(settings.observability)
        app = build_app(settings)
    except (ConfigError, tracing.TracingError) as exc:
        tracing.shutdown()
        print(f"reef: configuration error: {exc}", file=sys.stderr)
        return 2
    except BadRequest as exc:  # a part refused a setting, named (a recipe's recipe_config.* is under learning)
        tracing.shutdown()
        prefix = "learning." if (exc.field or "").startswith("recipe_config") else ""
        print(f"reef: configuration error: {prefix}{exc.message}", file=sys.stderr)
        return 2
    for line in startup_warnings(settings):
        (log.info if line.startswith("sandbox: bubblewrap") else log.warning)("%s", line)
    if traced is not None:
        log.info("tracing: spans go to %s (service.name %s)", traced.url, settings.observability.service_name)
    try:
        return _run_server(settings, app)
    finally:
        tracing.shutdown()  # the server has stopped: flush the spans still queued


def _run_server(settings: Settings, app: Any) -> int:
    import uvicorn

    from reef.service.server import CoalescingHttpToolsProtocol

    log.info(
        "Reef serving on http://%s:%d (engine: %s, recipe: %s, state: %s)",
        settings.reef.host,
        settings.reef.port,
        settings.inference.resolved_backend(),
        settings.learning.recipe,
        settings.storage.dir,
    )
    from reef.cli.workers import is_worker, reuseport_socket

    sockets = None
    if is_worker():  # one of `--reef.workers N`: its own socket on the shared port
        sockets = [reuseport_socket(settings.reef.host, settings.reef.port)]
    config = uvicorn.Config(
        app,
        host=settings.reef.host,
        port=settings.reef.port,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,
        access_log=False,
        proxy_headers=False,
        log_level=settings.reef.log_level,
        timeout_graceful_shutdown=5,
    )
    server = _server_class()(config)
    server.run(sockets=sockets)
    return 0 if server.started else 1


def _server_class() -> Any:
    import uvicorn

    class FlushingServer(uvicorn.Server):
        """uvicorn's server, flushing queued spans once the app has shut down.

        On SIGTERM uvicorn shuts down gracefully and then raises the signal again, which ends the process before
        `run()` returns: the flush has to happen inside its shutdown.
        """

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)
            if tracing.active is not None:
                await asyncio.to_thread(tracing.shutdown)

    return FlushingServer
