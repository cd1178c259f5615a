"""A real `reef serve` subprocess in front of the fake upstream provider, shared per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream, start_fake_upstream


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    fake = start_fake_upstream()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def reef(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefProcess]:
    state = tmp_path_factory.mktemp("reef-state")
    with ReefProcess(
        state, "--inference.upstream-url", upstream.url, "--inference.upstream-model", "fake-model"
    ) as proc:
        yield proc


@pytest.fixture()
def http(reef: ReefProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=reef.url, timeout=30) as client:
        yield client


def scenario_headers(name: str) -> dict[str, str]:
    return {"x-reef-scenario": name}


def stored_record(http: httpx.Client, scenario: str, receipt: str) -> dict:
    response = http.get(f"/reef/scenarios/{scenario}/records/{receipt}")
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture()
def state_dir(reef: ReefProcess) -> Path:
    return reef.state_dir
