"""Prometheus metrics of the service (one registry per app, so tests can build many apps)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reef.core.views import RolloutView


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
        labels = ["scenario", "arm"]
        self.rollout_requests = Gauge(
            "reef_rollout_requests", "Requests served per rollout arm", labels, registry=self.registry
        )
        self.rollout_errors = Gauge(
            "reef_rollout_errors", "Failed requests (5xx, timeouts) per rollout arm", labels, registry=self.registry
        )
        self.rollout_reports = Gauge(
            "reef_rollout_reports", "Reports attributed to each rollout arm", labels, registry=self.registry
        )
        self.rollout_mean_score = Gauge(
            "reef_rollout_mean_score", "Mean attributed report score per rollout arm", labels, registry=self.registry
        )
        self.rollout_open = Gauge(
            "reef_rollout_open", "1 while the scenario has an open rollout", ["scenario"], registry=self.registry
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

    def show_rollouts(self, views: Mapping[str, RolloutView]) -> None:
        """Set the per-arm rollout gauges from each scenario's rollout view (`GET /reef/scenarios/{s}/rollout`)."""
        for scenario, view in views.items():
            self.rollout_open.labels(scenario).set(1 if view["state"] == "canary" else 0)
            for arm, stats in view["arms"].items():
                self.rollout_requests.labels(scenario, arm).set(stats["requests"])
                self.rollout_errors.labels(scenario, arm).set(stats["errors"])
                self.rollout_reports.labels(scenario, arm).set(stats["reports"])
                if stats["mean"] is not None:
                    self.rollout_mean_score.labels(scenario, arm).set(stats["mean"])
