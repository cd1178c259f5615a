"""The core install (`pip install reef`, no extras) serves, records and takes reports in front of an upstream.

A fresh virtual environment gets this checkout without extras (pip's cache keeps it quick after the first run);
its `reef serve` proxies the fake upstream, records an inference and a report, serves a harness recipe, and
refuses the embedded model naming the `[local]` extra. torch and the other heavy packages are never installed.
"""

from __future__ import annotations

import os
import subprocess
import venv
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

pytestmark = pytest.mark.e2e

CHECKOUT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "peft", "gguf", "safetensors", "accelerate", "llguidance", "llama_cpp")
# The checkout must not shadow the installed package: no PYTHONPATH, and every command runs outside the checkout.
CLEAN_ENV = {"PYTHONPATH": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("core-venv")
    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(CHECKOUT)],
        check=True,
        cwd=root,
        env=_env(),
        timeout=900,
    )
    return python


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    fake = start_fake_upstream()
    yield fake
    fake.stop()


def _env() -> dict[str, str]:
    return {**os.environ, **CLEAN_ENV}


def _serve(core_python: Path, tmp_path: Path, upstream: FakeUpstream, *flags: str) -> ReefProcess:
    return ReefProcess(
        tmp_path / "state",
        "--inference.upstream-url",
        upstream.url,
        "--inference.upstream-model",
        "fake-model",
        *flags,
        python=str(core_python),
        cwd=tmp_path,
        env=CLEAN_ENV,
    )


def test_the_core_install_has_none_of_the_heavy_packages(core_python: Path, tmp_path: Path) -> None:
    probe = f"import importlib.util as u; print(','.join(m for m in {HEAVY!r} if u.find_spec(m)))"
    found = subprocess.run(
        [str(core_python), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=_env(), check=True
    )
    assert found.stdout.strip() == ""
    torch = subprocess.run([str(core_python), "-c", "import torch"], capture_output=True, cwd=tmp_path, env=_env())
    assert torch.returncode != 0


def test_the_core_install_records_an_inference_and_a_report(
    core_python: Path, tmp_path: Path, upstream: FakeUpstream
) -> None:
    with _serve(core_python, tmp_path, upstream) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        headers = {"x-reef-scenario": "core"}
        answer = http.post(
            "/v1/chat/completions",
            headers=headers,
            json={"model": "fake-model", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "echo: hello"
        receipt = answer.headers["x-reef-agent-record-id"]
        report = http.post("/reef/report", headers=headers, json={"score": 1.0, "references": [receipt]})
        assert report.status_code == 200, report.text
        stored = http.get(f"/reef/scenarios/core/records/{receipt}")
        assert stored.status_code == 200, stored.text
        assert stored.json()["cited_by"] == [report.json()["agent_record_id"]]
        assert http.get("/reef/status").status_code == 200


def test_the_core_install_serves_a_harness_recipe(core_python: Path, tmp_path: Path, upstream: FakeUpstream) -> None:
    with (
        _serve(core_python, tmp_path, upstream, "--learning.recipe", "evolve") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        adapters = http.get("/reef/harness/adapters")
        assert adapters.status_code == 200, adapters.text
        assert adapters.json()["adapters"]
        answer = http.post(
            "/v1/chat/completions",
            headers={"x-reef-scenario": "agent"},
            json={"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert answer.status_code == 200, answer.text


def test_the_embedded_model_on_the_core_install_exits_2_naming_the_local_extra(
    core_python: Path, tmp_path: Path
) -> None:
    refused = subprocess.run(
        [str(core_python), "-m", "reef.cli.main", "serve", "--inference.model-path", "smollm2"]
        + ["--learning.recipe", "sft", "--storage.dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr
    assert "[local]" in refused.stderr
    assert "[train]" in refused.stderr
    assert "Traceback" not in refused.stderr
