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


def build_app(settings: Settings) -> Any:
    """Open every part named by `settings` and return the ASGI app."""
    from reef.application.compose import build_runtime
    from reef.cli.workers import shared_writer_fd
    from reef.service.app import create_app

    runtime = build_runtime(settings, writer_fd=shared_writer_fd())
    return create_app(settings, runtime, runtime.engine)


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
