"""The app's state, typed: the parts `create_app` was given, and accessors the routes reach them through."""

from __future__ import annotations

import dataclasses

from starlette.requests import Request

from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.service.metrics import ServiceMetrics
from reef.service.runtime_api import RuntimeAPI
from reef.storage.base import RecordStore


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceState:
    """Everything a route may use: the settings, the runtime, the record store, the engine and the metrics."""

    settings: Settings
    runtime: RuntimeAPI
    records: RecordStore
    engine: Engine
    metrics: ServiceMetrics


def state_of(request: Request) -> ServiceState:
    """The service state of the app serving `request`."""
    state: ServiceState = request.app.state.reef
    return state


def runtime_of(request: Request) -> RuntimeAPI:
    """The runtime of the app serving `request`."""
    return state_of(request).runtime
