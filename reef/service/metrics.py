"""Prometheus metrics of the service (one registry per app, so tests can build many apps)."""

from __future__ import annotations

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
