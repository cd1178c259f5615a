"""Building the ASGI app from already-opened parts (the CLI opens them; tests may pass their own)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator

from fastapi import FastAPI

import reef
from reef.core.episode_tokens import EpisodeKey
from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.service.errors import install_error_handlers
from reef.service.guard import RequestGuard
from reef.service.metrics import ServiceMetrics
from reef.service.middleware import EdgeMiddleware
from reef.service.openapi import reef_openapi
from reef.service.openapi_pages import install_api_pages
from reef.service.routes import console, discovery, feedback, harness, inference, scenarios, system, training
from reef.service.runtime_api import RuntimeAPI
from reef.service.state import ServiceState


def create_app(settings: Settings, runtime: RuntimeAPI, engine: Engine) -> EdgeMiddleware:
    """The Reef ASGI app; `runtime` is the domain facade (`reef.application.runtime.Runtime` implements it).

    The outermost layer is `EdgeMiddleware` (auth, body limit, Host/Origin/body-type checks, metrics), which serves
    the `/v1/*` hot path itself and hands everything else to the FastAPI app (`.app`), which also owns the lifespan
    and the OpenAPI document.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        await runtime.start()
        # Everything loaded so far lives as long as the service: keep it out of the collector's full passes.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await runtime.stop()
            await engine.aclose()

    app = FastAPI(
        title="Reef",
        version=reef.__version__,
        description="Serve, record, learn from feedback, and publish better releases of an agent.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from reef.service.openapi_pages: no unpinned script from a CDN
        redoc_url=None,
    )
    metrics = ServiceMetrics()
    state = ServiceState(settings, runtime, engine, metrics)
    app.state.reef = state  # read through reef.service.state.state_of / runtime_of
    install_error_handlers(app)
    app.openapi = reef_openapi(app)  # type: ignore[method-assign]  # adds the /v1 fast path FastAPI cannot see
    install_api_pages(app)
    for module in (feedback, scenarios, training, harness, system, console, discovery):
        app.include_router(module.router)
    return EdgeMiddleware(
        app,
        tokens=settings.reef.all_tokens(),
        admin_tokens=settings.reef.all_admin_tokens(),
        episodes=EpisodeKey.for_settings(settings),
        max_body_bytes=settings.reef.max_body_bytes,
        metrics=metrics,
        fast_path=inference.InferenceEndpoints(state),
        guard=RequestGuard.for_settings(settings.reef),
    )
