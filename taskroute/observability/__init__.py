"""Structured logs with request ids, the Prometheus metrics registry, event-loop lag."""
