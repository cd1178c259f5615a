"""Property-based fuzzing (schemathesis) of the OpenAPI document finds no server error.

It covers the `/reef/*` routes and the `/v1/*` ones (described by reef/service/openapi_inference.py), the latter
in front of the fake upstream; tests/service/test_fuzz_v1.py fuzzes `/v1/*` deeper, in every dialect pairing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reef_process import ReefProcess

pytestmark = pytest.mark.e2e


def test_fuzzing_the_documented_routes_finds_no_5xx(reef: ReefProcess, tmp_path: Path) -> None:
    st = shutil.which("st") or str(Path(sys.executable).parent / "st")
    if not Path(st).exists():
        pytest.skip("schemathesis is not installed")
    result = subprocess.run(
        [
            st,
            "run",
            reef.url + "/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "25",
            "--include-path-regex",
            "^/(reef|v1)/",
            "--header",
            "x-reef-scenario: fuzz",
            "--seed",
            "7",
            "--suppress-health-check",
            "all",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
