"""The app's state, typed: the parts `create_app` was given, and accessors the routes reach them through (one per
route group of the runtime)."""

from __future__ import annotations

import dataclasses

from starlette.requests import Request

from reef.core.settings import Settings
from reef.inference.base import Engine
from reef.service.metrics import ServiceMetrics
from reef.service.runtime_api import (
    HarnessAPI,
    RecordsAPI,
    ReleasesAPI,
    RolloutAPI,
    RuntimeAPI,
    ScenariosAPI,
    SearchAPI,
    TrainingAPI,
)


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceState:
    """Everything a route may use: the settings, the runtime, the engine and the metrics."""

    settings: Settings
    runtime: RuntimeAPI
    engine: Engine
    metrics: ServiceMetrics


def state_of(request: Request) -> ServiceState:
    """The service state of the app serving `request`."""
    state: ServiceState = request.app.state.reef
    return state


def runtime_of(request: Request) -> RuntimeAPI:
    """The runtime of the app serving `request`."""
    return state_of(request).runtime


def scenarios_of(request: Request) -> ScenariosAPI:
    """The scenarios group: creation, deletion, and waking a scenario's learner."""
    return state_of(request).runtime


def records_of(request: Request) -> RecordsAPI:
    """The records group: reports and imports stored, records read back."""
    return state_of(request).runtime.recording


def releases_of(request: Request) -> ReleasesAPI:
    """The releases group: release history, rollback, promote, the commit log."""
    return state_of(request).runtime


def training_of(request: Request) -> TrainingAPI:
    """The training group: contract, control, requested steps, gate tasks, status."""
    return state_of(request).runtime


def rollout_of(request: Request) -> RolloutAPI:
    """The rollout group: a scenario's canary rollout."""
    return state_of(request).runtime


def harness_of(request: Request) -> HarnessAPI:
    """The harness group: a release's harness files, the installer, proposals."""
    return state_of(request).runtime.harness


def search_of(request: Request) -> SearchAPI:
    """The search group: a discovery scenario's archive."""
    return state_of(request).runtime
