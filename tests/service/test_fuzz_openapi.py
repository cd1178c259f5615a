"""schemathesis against a live `reef serve` (with both kinds of token): the API document tells the truth.

All four phases (examples, coverage, fuzzing, stateful) run, with the checks that the document is exact: every
status answered is documented, every content type too, every body matches its schema, and no input is a server
error. A schema-mismatch warning (the API refusing most inputs the document allows) fails the run too. It runs
once with the admin token and once with an agent token, whose 403s on admin routes are documented answers. It
covers every documented route, the `/v1/*` ones (described by reef/service/openapi_inference.py) in front of the fake
upstream; tests/service/test_fuzz_v1.py fuzzes `/v1/*` deeper, in every dialect pairing. The budget is bounded:
a few examples per operation, a fixed seed and a deadline for the whole run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.e2e

AGENT_TOKEN = "fuzz-agent-token"
ADMIN_TOKEN = "fuzz-admin-token"
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
MAX_EXAMPLES = {"admin": 8, "agent": 3}  # per operation and phase: the agent run mostly meets 403s
RUN_DEADLINE_S = 300
CONFIG = '[warnings]\nfail-on = ["validation_mismatch"]\n'


@pytest.mark.parametrize("kind", ["admin", "agent"])
def test_the_documented_routes_answer_only_what_the_document_says(
    kind: str, upstream: FakeUpstream, tmp_path: Path
) -> None:
    st = shutil.which("st") or str(Path(sys.executable).parent / "st")
    if not Path(st).exists():
        pytest.skip("schemathesis is not installed")
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    flags = ["--inference.upstream-url", upstream.url, "--inference.upstream-model", "fake-model"]
    flags += ["--reef.tokens", f"[{AGENT_TOKEN}]", "--reef.admin-tokens", f"[{ADMIN_TOKEN}]"]
    token = ADMIN_TOKEN if kind == "admin" else AGENT_TOKEN
    with ReefProcess(tmp_path / "state", *flags) as reef:
        result = subprocess.run(
            [
                st,
                "--config-file",
                str(config),
                "run",
                reef.url + "/openapi.json",
                "--checks",
                CHECKS,
                "--phases",
                "examples,coverage,fuzzing,stateful",
                "--max-examples",
                str(MAX_EXAMPLES[kind]),
                "--request-timeout",
                "30",
                "--header",
                f"authorization: Bearer {token}",
                "--header",
                "x-reef-scenario: fuzz",
                "--seed",
                "7",
                "--suppress-health-check",
                "all",
                "--workers",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=RUN_DEADLINE_S,
        )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Schema validation mismatch" not in result.stdout, result.stdout[-6000:]
