"""A real OTLP/HTTP trace receiver on 127.0.0.1, in a background thread: what Reef's exporter would talk to.

`POST /v1/traces` bodies are protobuf `ExportTraceServiceRequest`s (gzip accepted); each span is kept as a
`ReceivedSpan` (ids in hex, attributes decoded). With `keep_spans=False` it only counts bodies and bytes
(a cheap sink for benchmarks). Anything else gets a 404.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

_EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span as the collector decoded it."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int  # OTLP SpanKind: 2 = server, 1 = internal
    status_code: int  # OTLP StatusCode: 0 unset, 1 ok, 2 error
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[str] = field(default_factory=list)


class OtlpCollector:
    """`with OtlpCollector() as collector:` → `collector.url` (base URL), `collector.spans`, `wait_for(...)`."""

    def __init__(self, keep_spans: bool = True) -> None:
        self.keep_spans = keep_spans
        self.spans: list[ReceivedSpan] = []
        self.exports = 0  # POST bodies received
        self.bytes_received = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-collector", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> OtlpCollector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 15.0) -> list[ReceivedSpan]:
        """The spans so far, once `found(spans)` holds; AssertionError with what arrived if it never does."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"the collector never got the spans looked for; it got {spans}")
            time.sleep(0.05)

    def _receive(self, body: bytes) -> None:
        with self._lock:
            self.exports += 1
            self.bytes_received += len(body)
        if not self.keep_spans:
            return
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            status_code=span.status.code,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            events=[event.name for event in span.events],
                        )
                    )
        with self._lock:
            self.spans.extend(received)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                if self.path != "/v1/traces":
                    self._answer(404, b"not found", "text/plain")
                    return
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                collector._receive(body)
                self._answer(200, _EMPTY_RESPONSE, "application/x-protobuf")

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        return Handler
