"""Optional OpenTelemetry tracing: a span per HTTP request and per learner step, exported over OTLP/HTTP.

Off unless `observability.otlp_endpoint` is set (`configure`). Off, nothing of OpenTelemetry is imported and every
call here does nothing: `span()` hands back one shared inert span, and the request hot path checks
`tracing.active is not None` once per request. On, ended spans go to `<endpoint>/v1/traces` through the SDK's
`BatchSpanProcessor`: a background thread batches and posts them, so a request never waits on the collector.

The SDK's own environment variables still apply (`OTEL_BSP_SCHEDULE_DELAY`, `OTEL_TRACES_SAMPLER`,
`OTEL_EXPORTER_OTLP_HEADERS`, ...). An incoming W3C `traceparent` makes a request's span a child of the caller's.

    with tracing.span("reef.learner.step", scenario="support", step=3) as step:
        with tracing.span("reef.learner.train"):
            ...
        step.set(verdict="published")
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Iterator, Mapping
from typing import Any, TypeVar

import reef
from reef.core.settings import ObservabilitySettings

INSTALL_HINT = "pip install 'reef[tracing]' (opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http)"
TRACES_PATH = "/v1/traces"
# While a request is traced its ASGI scope holds a dict under this key: span attributes the handler notes for it.
SCOPE_NOTES = "reef.trace_notes"
# One export's HTTP timeout: the most a flush at shutdown waits on a collector that does not answer.
EXPORT_TIMEOUT_S = 5.0

T = TypeVar("T")


class TracingError(ValueError):
    """Tracing was asked for and cannot start; the message names the setting."""


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector given by its base URL (`http://host:4318`) or by that URL itself."""
    url = endpoint.strip().rstrip("/")
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https") or not rest:
        raise TracingError(f"observability.otlp_endpoint: must be an http:// or https:// URL, got {endpoint!r}")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def _reef_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """`scenario="s"` → `{"reef.scenario": "s"}`; None is left out, anything not a plain scalar becomes text."""
    found: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        found["reef." + name] = value if isinstance(value, str | bool | int | float) else str(value)
    return found


class Span:
    """A span in progress; `set(**attributes)` adds `reef.<name>` attributes (None values are left out)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attributes: Any) -> None:
        self._span.set_attributes(_reef_attributes(attributes))

    @property
    def ids(self) -> tuple[str, str]:
        """(trace id, span id) as the 32 and 16 hex digits OTLP and W3C `traceparent` use."""
        context = self._span.get_span_context()
        return f"{context.trace_id:032x}", f"{context.span_id:016x}"


class _NoSpan(Span):
    """Tracing off: one reusable context manager whose every method does nothing."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, **attributes: Any) -> None:
        pass

    @property
    def ids(self) -> tuple[str, str]:
        return "0" * 32, "0" * 16


NO_SPAN = _NoSpan()


class RequestSpan:
    """The server span of one HTTP request, the current span while the request is handled.

    `notes` collects attributes (full names, e.g. `reef.upstream_latency_s`) that the handler learns on the way;
    `finish(status)` writes them with the HTTP status and ends the span (5xx marks it an error).
    """

    __slots__ = ("_span", "_token", "_tracing", "notes")

    def __init__(self, span: Any, token: object, tracing: Tracing) -> None:
        self._span = span
        self._token = token
        self._tracing = tracing
        self.notes: dict[str, Any] = {}

    def set_attribute(self, name: str, value: Any) -> None:
        if value is not None:
            self._span.set_attribute(name, value)

    def rename(self, name: str) -> None:
        self._span.update_name(name)

    def record_exception(self, exc: BaseException) -> None:
        self._span.record_exception(exc)

    def finish(self, status: int) -> None:
        span = self._span
        span.set_attributes({name: value for name, value in self.notes.items() if value is not None})
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(self._tracing._error_status)
        span.end()
        self._tracing._context.detach(self._token)


class Tracing:
    """A tracer provider exporting to one OTLP/HTTP collector; made by `configure`, ended by `shutdown`."""

    def __init__(self, url: str, service_name: str) -> None:
        try:
            from opentelemetry import context, trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as exc:
            raise TracingError(
                f"observability.otlp_endpoint is set but OpenTelemetry is not installed ({exc.name} is missing): "
                f"{INSTALL_HINT}"
            ) from exc
        self.url = url
        resource = Resource.create({"service.name": service_name, "service.version": reef.__version__})
        # Ours to shut down (`shutdown`), not the SDK's at exit: `reef serve` flushes once its server has stopped.
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)))
        self._tracer = self.provider.get_tracer("reef", reef.__version__)
        self._context = context
        self._in_context = trace.set_span_in_context
        self._server_kind = trace.SpanKind.SERVER
        self._error_status = trace.Status(trace.StatusCode.ERROR)
        self._propagator = TraceContextTextMapPropagator()

    @contextlib.contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[Span]:
        """A span, current inside the block (spans opened there are its children); an exception marks it failed."""
        with self._tracer.start_as_current_span(name, attributes=_reef_attributes(attributes)) as live:
            yield Span(live)

    def request(
        self, name: str, attributes: Mapping[str, Any], traceparent: str | None = None, tracestate: str | None = None
    ) -> RequestSpan:
        """Start the server span of an HTTP request (a child of the caller's `traceparent`) and make it current."""
        parent = None
        if traceparent is not None:
            carrier = {"traceparent": traceparent}
            if tracestate is not None:
                carrier["tracestate"] = tracestate
            parent = self._propagator.extract(carrier)
        kept = {name: value for name, value in attributes.items() if value is not None}
        span = self._tracer.start_span(name, context=parent, kind=self._server_kind, attributes=kept)
        return RequestSpan(span, self._context.attach(self._in_context(span)), self)

    def flush(self, timeout_s: float = EXPORT_TIMEOUT_S) -> bool:
        """Export every span ended so far; False if that did not finish within `timeout_s`."""
        return self.provider.force_flush(int(timeout_s * 1000))

    def shutdown(self) -> None:
        self.provider.shutdown()


# The tracing in force in this process, or None (off). Read once per request by the service's middleware.
active: Tracing | None = None


def configure(settings: ObservabilitySettings) -> Tracing | None:
    """Start exporting spans when `settings.otlp_endpoint` is set (else None: tracing stays off).

    Raises `TracingError` naming `observability.otlp_endpoint` for a bad URL or when the packages are missing.
    """
    global active
    if settings.otlp_endpoint is None:
        return None
    started = Tracing(traces_url(settings.otlp_endpoint), settings.service_name)
    if active is not None:
        active.shutdown()
    active = started
    return started


def shutdown() -> None:
    """Flush the spans still queued and stop exporting; tracing is off afterwards (nothing to do when it was)."""
    global active
    stopping, active = active, None
    if stopping is not None:
        stopping.shutdown()


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Span]:
    """`with span("reef.learner.train", step=3) as s:` — a span when tracing is on, the inert `NO_SPAN` when off."""
    tracing = active
    if tracing is None:
        return NO_SPAN
    return tracing.span(name, **attributes)


async def timed(notes: dict[str, Any], name: str, call: Awaitable[T]) -> T:
    """Await `call`, noting under `name` in a traced request's notes how many seconds it took."""
    started = time.perf_counter()
    try:
        return await call
    finally:
        notes[name] = round(time.perf_counter() - started, 6)
