"""Structured logs with request ids, Prometheus metrics, readiness checks."""
