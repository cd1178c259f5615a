"""Observability: optional OpenTelemetry spans per HTTP request and per learner step (see `tracing`)."""
