"""Prometheus metrics of the service (one registry per app, so tests can build many apps)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram


class ServiceMetrics:
    """The counters and histograms `/metrics` exposes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("reef_requests", "HTTP requests served", ["route", "status"], registry=self.registry)
        self.latency_s = Histogram(
            "reef_request_latency_seconds",
            "Time from request start to the end of the response",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        self.records_appended = Counter(
            "reef_records_appended", "Records made durable", ["request_type"], registry=self.registry
        )
        self.upstream_errors = Counter(
            "reef_upstream_errors", "Inference requests that failed upstream", ["status"], registry=self.registry
        )
        # Labelled children by label values: `labels()` costs a lock and a tuple per call, on every request.
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        self._child(self.requests, route, str(status)).inc()
        self._child(self.latency_s, route).observe(seconds)

    def count_records(self, request_type: str, n: int = 1) -> None:
        self._child(self.records_appended, request_type).inc(n)
