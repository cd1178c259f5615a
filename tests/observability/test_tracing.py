"""OpenTelemetry tracing: spans per request (a real `reef serve`) and per learner step, to a real OTLP collector."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reef.core.settings import ObservabilitySettings
from reef.observability import tracing
from reef.storage.sql import SQLITE_FILENAME
from tests.fakes.learning_world import QUESTIONS, make_world, started
from tests.fakes.otlp_collector import OtlpCollector, ReceivedSpan
from tests.fakes.reef_process import ReefProcess
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

ROOT = Path(__file__).resolve().parents[2]
SERVER_KIND = 2
ERROR = 2


@pytest.fixture
def collector() -> Iterator[OtlpCollector]:
    with OtlpCollector() as running:
        yield running


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    server = start_fake_upstream()
    yield server
    server.stop()


@pytest.fixture
def configured(collector: OtlpCollector) -> Iterator[tracing.Tracing]:
    started = tracing.configure(ObservabilitySettings(otlp_endpoint=collector.url, service_name="reef-test"))
    assert started is not None
    yield started
    tracing.shutdown()


def _named(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    matching = [span for span in spans if span.name == name]
    assert len(matching) == 1, f"expected one {name!r} span in {[s.name for s in spans]}"
    return matching[0]


# --- the API ----------------------------------------------------------------------------------------------------


def test_the_endpoint_is_taken_with_or_without_the_traces_path() -> None:
    assert tracing.traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("https://otel.example/v1/traces") == "https://otel.example/v1/traces"
    assert tracing.traces_url("http://gateway/otlp") == "http://gateway/otlp/v1/traces"
    for bad in ("collector:4318", "ftp://collector", "http://"):
        with pytest.raises(tracing.TracingError, match="observability.otlp_endpoint"):
            tracing.traces_url(bad)


def test_with_no_endpoint_tracing_stays_off_and_every_span_is_the_inert_one() -> None:
    assert tracing.configure(ObservabilitySettings()) is None
    assert tracing.active is None
    with tracing.span("reef.learner.step", scenario="s", step=1) as step:
        step.set(verdict="published")
        assert step is tracing.NO_SPAN
    tracing.shutdown()  # nothing to stop: harmless


async def test_a_learner_step_is_one_trace_whose_children_are_batch_train_evaluate_publish(
    collector: OtlpCollector, configured: tracing.Tracing
) -> None:
    # The shape the learner uses: a parent span around the step, a child per phase, awaits and threads inside.
    with tracing.span("reef.learner.step", scenario="support", step=3, batch_id="batch_1") as step:
        with tracing.span("reef.learner.batch", samples=8):
            pass
        with tracing.span("reef.learner.train", recipe="sft"):
            await asyncio.to_thread(sum, range(1000))
        with tracing.span("reef.learner.evaluate") as evaluate:
            await asyncio.sleep(0.01)
            evaluate.set(outcome="accepted", wins=5, losses=1)
        with tracing.span("reef.learner.publish", release_id="rel_2"):
            await asyncio.sleep(0)
        step.set(verdict="published", loss=0.25)
        trace_id, step_id = step.ids
    tracing.shutdown()  # flushes: every span has been posted when this returns

    spans = collector.spans
    parent = _named(spans, "reef.learner.step")
    assert (parent.trace_id, parent.span_id, parent.parent_span_id) == (trace_id, step_id, "")
    assert parent.attributes == {
        "reef.scenario": "support",
        "reef.step": 3,
        "reef.batch_id": "batch_1",
        "reef.verdict": "published",
        "reef.loss": 0.25,
    }
    assert parent.resource["service.name"] == "reef-test"
    children = ["reef.learner.batch", "reef.learner.train", "reef.learner.evaluate", "reef.learner.publish"]
    for name in children:
        child = _named(spans, name)
        assert (child.trace_id, child.parent_span_id) == (trace_id, step_id), name
        assert parent.start_ns <= child.start_ns <= child.end_ns <= parent.end_ns, name
    starts = [_named(spans, name).start_ns for name in children]
    assert starts == sorted(starts)
    assert _named(spans, "reef.learner.evaluate").attributes == {
        "reef.outcome": "accepted",
        "reef.wins": 5,
        "reef.losses": 1,
    }


async def test_a_real_learner_step_exports_its_trace_with_the_verdict_and_phases(
    collector: OtlpCollector, configured: tracing.Tracing, tmp_path: Path
) -> None:
    world = await started(make_world(tmp_path, mode="auto", batch_size=2, policy="always"))
    for question in list(QUESTIONS)[:2]:
        world.report("math", question, QUESTIONS[question])
    for _ in range(400):
        if world.commits("math") and world.runtime.status()["scenarios"]["math"]["job"]["state"] == "idle":
            break
        await asyncio.sleep(0.05)
    (commit,) = world.commits("math")
    await world.runtime.stop()
    tracing.shutdown()

    step = _named(collector.spans, "reef.learner.step")
    assert step.attributes["reef.scenario"] == "math" and step.attributes["reef.step"] == commit["step"]
    assert step.attributes["reef.verdict"] == "published" == commit["verdict"]
    assert step.attributes["reef.release_id"] == commit["release_id"]
    for name in ("reef.learner.batch", "reef.learner.train", "reef.learner.evaluate", "reef.learner.publish"):
        child = _named(collector.spans, name)
        assert (child.trace_id, child.parent_span_id) == (step.trace_id, step.span_id), name
    assert _named(collector.spans, "reef.learner.evaluate").attributes["reef.outcome"] == "accepted"


async def test_an_exception_inside_a_step_marks_the_phase_and_the_step_failed(
    collector: OtlpCollector, configured: tracing.Tracing
) -> None:
    with (
        pytest.raises(RuntimeError),
        tracing.span("reef.learner.step", scenario="s"),
        tracing.span("reef.learner.evaluate"),
    ):
        raise RuntimeError("the gate's evaluator broke")
    configured.flush()
    spans = collector.wait_for(lambda found: len(found) == 2)
    for name in ("reef.learner.step", "reef.learner.evaluate"):
        failed = _named(spans, name)
        assert failed.status_code == ERROR
        assert "exception" in failed.events


def test_tracing_asked_for_without_the_packages_names_the_setting_and_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if opentelemetry-sdk were not installed
    with pytest.raises(tracing.TracingError) as refused:
        tracing.configure(ObservabilitySettings(otlp_endpoint="http://127.0.0.1:4318"))
    assert "observability.otlp_endpoint" in str(refused.value)
    assert "pip install 'reef[tracing]'" in str(refused.value)
    assert tracing.active is None


def _opentelemetry_loaded_by(imports: str) -> dict[str, list[str]]:
    check = (
        f"import json, sys, {imports}; loaded = [m for m in sys.modules if m.startswith('opentelemetry')];"
        "print(json.dumps({'any': loaded, 'sdk': [m for m in loaded if m.startswith(SDK)]}))"
    )
    code = f"SDK = {SDK_MODULES!r}; {check}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)


# What tracing brings in when on. The bare API (`opentelemetry.trace`, `opentelemetry.context`) may be loaded anyway:
# FastAPI imports it for its own telemetry, which stays off while no global tracer provider is set.
SDK_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto")


def test_the_tracing_module_imports_nothing_of_opentelemetry_until_configured() -> None:
    assert _opentelemetry_loaded_by("reef.observability.tracing") == {"any": [], "sdk": []}


def test_the_serving_modules_import_no_opentelemetry_sdk_or_exporter() -> None:
    loaded = _opentelemetry_loaded_by("reef.cli.serve, reef.service.app, reef.service.routes.inference")
    assert loaded["sdk"] == []


# --- a real `reef serve` ----------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_reef_serve_exports_a_span_per_request_with_scenario_receipt_release_and_status(
    tmp_path: Path, collector: OtlpCollector, upstream: FakeUpstream
) -> None:
    # A minute between scheduled exports: what the collector gets, it gets from the flush when the server stops.
    reef = ReefProcess(
        tmp_path / "state",
        "--inference.upstream-url",
        upstream.url,
        "--observability.otlp-endpoint",
        collector.url,
        "--observability.service-name",
        "reef-e2e",
        env={"OTEL_BSP_SCHEDULE_DELAY": "60000"},
    ).start()
    try:
        caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        chat = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        answered = httpx.post(
            reef.url + "/v1/chat/completions",
            json=chat,
            headers={"x-reef-scenario": "support", "traceparent": f"00-{caller_trace}-00f067aa0ba902b7-01"},
            timeout=30,
        )
        assert answered.status_code == 200
        receipt = answered.headers["x-reef-agent-record-id"]
        streamed = httpx.post(
            reef.url + "/v1/chat/completions",
            json={**chat, "stream": True},
            headers={"x-reef-scenario": "support"},
            timeout=30,
        )
        assert streamed.status_code == 200
        refused = httpx.post(reef.url + "/v1/chat/completions", json=chat, timeout=30)  # no scenario: 400
        assert refused.status_code == 400
        assert httpx.get(reef.url + "/reef/status", timeout=30).status_code == 200
        assert collector.exports == 0  # nothing before the flush
    finally:
        reef.stop()

    spans = collector.wait_for(lambda found: len(found) >= 4)
    chats = [span for span in spans if span.name == "POST /v1/chat/completions"]
    assert len(chats) == 3
    plain = next(span for span in chats if span.attributes.get("reef.agent_record_id") == receipt)
    assert plain.kind == SERVER_KIND
    assert plain.trace_id == caller_trace and plain.parent_span_id == "00f067aa0ba902b7"
    assert plain.resource["service.name"] == "reef-e2e"
    attributes = plain.attributes
    assert attributes["reef.scenario"] == "support"
    assert attributes["http.response.status_code"] == 200
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.route"] == "/v1/chat/completions"
    assert attributes.get("reef.release_id") == answered.headers.get("x-reef-release-id")
    assert 0 < attributes["reef.upstream_latency_s"] < (plain.end_ns - plain.start_ns) / 1e9

    stream = next(span for span in chats if span is not plain and span.attributes["http.response.status_code"] == 200)
    stream_receipt = stream.attributes["reef.agent_record_id"]
    assert stream_receipt != receipt and stream_receipt in streamed.text  # the receipt it sent in-band
    assert stream.attributes["reef.upstream_latency_s"] > 0

    bad = next(span for span in chats if span.attributes["http.response.status_code"] == 400)
    assert "reef.agent_record_id" not in bad.attributes and "reef.scenario" not in bad.attributes
    assert bad.status_code != ERROR  # a client's mistake is not the server's error

    status = _named(spans, "GET /reef/status")
    assert status.attributes["http.route"] == "/reef/status"
    assert not [span for span in spans if span.attributes["url.path"] == "/healthz"]  # probes are not traced


SITECUSTOMIZE = """
import atexit, json, os, sys

def _loaded():
    out = os.path.join(os.environ["REEF_TEST_MODULES_DIR"], f"{os.getpid()}.json")
    with open(out, "w") as file:
        json.dump(sorted(m for m in sys.modules if m.startswith(SDK_MODULES)), file)

atexit.register(_loaded)
"""


@pytest.mark.e2e
def test_with_tracing_off_reef_serve_sends_nothing_and_loads_no_opentelemetry_sdk(
    tmp_path: Path, collector: OtlpCollector, upstream: FakeUpstream
) -> None:
    # The SDK's own variables point at the collector: only Reef's setting may turn tracing on.
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(f"SDK_MODULES = {SDK_MODULES!r}\n" + textwrap.dedent(SITECUSTOMIZE))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url + "/v1/traces",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), str(ROOT), os.environ.get("PYTHONPATH")])),
        "REEF_TEST_MODULES_DIR": str(hooks),
    }
    reef = ReefProcess(tmp_path / "state", "--inference.upstream-url", upstream.url, env=env).start()
    try:
        for stream in (False, True):
            answered = httpx.post(
                reef.url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream},
                headers={"x-reef-scenario": "support"},
                timeout=30,
            )
            assert answered.status_code == 200
        assert reef.process is not None
        # SIGINT, not SIGTERM: uvicorn raises the signal again once it has stopped, and only an interrupt lets the
        # interpreter exit through its atexit hooks (SIGTERM's default action ends it on the spot).
        reef.process.send_signal(signal.SIGINT)
        reef.process.wait(30)
    finally:
        reef.stop()
    loaded = json.loads((hooks / f"{reef.process.pid}.json").read_text())  # written by the serving process itself
    assert loaded == []
    assert collector.exports == 0


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_reef_serve_refuses_to_start_when_tracing_is_asked_for_without_the_packages(tmp_path: Path) -> None:
    without_sdk = (
        "import sys; sys.modules['opentelemetry.sdk'] = None; from reef.cli.main import main; sys.exit(main())"
    )
    flags = ["serve", "--storage.dir", str(tmp_path), "--inference.upstream-url", "http://127.0.0.1:9"]
    flags += ["--observability.otlp-endpoint", "http://127.0.0.1:4318"]
    out = subprocess.run(
        [sys.executable, "-c", without_sdk, *flags], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 2
    assert "observability.otlp_endpoint" in out.stderr
    assert "pip install 'reef[tracing]'" in out.stderr
    assert not (tmp_path / SQLITE_FILENAME).exists()  # it stopped before opening anything
