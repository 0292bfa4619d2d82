"""Prometheus metrics: the registry of counters, histograms and gauges.

Counters and histograms are updated where things happen (claims, submits, sweeps). The
endpoint that serves them, and refreshes the gauges that describe the database, is
`taskroute.server.metrics`.

Several server processes (`taskroute serve --workers N`): each process counts its own requests.
Without configuration a scrape sees one worker; set `PROMETHEUS_MULTIPROC_DIR` to an empty
directory before starting the server and /metrics aggregates all workers (prometheus_client's
multiprocess mode; the database gauges are then reported by the scraped worker, `mostrecent`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from taskroute.errors import TaskrouteError

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
_GAUGE_MODE: dict[str, Any] = {"multiprocess_mode": "mostrecent"} if MULTIPROCESS else {}
_LIVE_SUM_MODE: dict[str, Any] = {"multiprocess_mode": "livesum"} if MULTIPROCESS else {}

CLAIMS = Counter(
    "taskroute_claims_total",
    "Claims that handed a task to an expert (outcome: new claim, the expert's held one, or"
    " the held one as this process remembered it when the database did not answer in time)",
    ["outcome"],
)
CLAIMS_EMPTY = Counter("taskroute_claims_empty_total", "Claims that found nothing to do")
CLAIMS_RETRIED = Counter(
    "taskroute_claims_retried_total",
    "Claims asked again because the work left was locked for a moment by another transaction",
)
PROBES_UNANSWERED = Counter(
    "taskroute_probes_unanswered_total",
    "Probes asked on the way to a refusal that went unanswered (waited_for: a probe connection,"
    " or the statement's answer)",
    ["waited_for"],
)
LEASE_EXPIRIES = Counter(
    "taskroute_lease_expiries_total",
    "Leases that expired without a submit, by what became of the task",
    ["result"],
)
SUBMIT_SECONDS = Histogram(
    "taskroute_submit_seconds",
    "Time to store a submit (answer, receipt, payout), by outcome",
    ["outcome"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
WAKEUPS = Counter("taskroute_wakeups_total", "Waiting experts woken because matching work appeared")
HTTP_REQUESTS = Counter(
    "taskroute_http_requests_total",
    "HTTP requests by route template and status",
    ["method", "route", "status"],
)
HTTP_SECONDS = Histogram(
    "taskroute_http_request_seconds",
    "HTTP request latency by route template",
    ["method", "route"],
)
OPEN_TASKS = Gauge(
    "taskroute_open_tasks",
    "Open (claimable) tasks by skill, refreshed on scrape",
    ["skill"],
    **_GAUGE_MODE,
)
INGEST_LAG = Gauge(
    "taskroute_ingest_lag_seconds",
    "Age of the oldest project still ingesting (0 when none), refreshed on scrape",
    **_GAUGE_MODE,
)
POOL_SIZE = Gauge("taskroute_db_pool_connections", "Pooled connections", ["state"], **_GAUGE_MODE)
# Admission (db/admission.py): requests refused at once, and requests waiting at scrape time.
ADMISSION_SHED = Counter(
    "taskroute_admission_shed_total",
    "Requests refused (UNAVAILABLE) because their line for a connection was full, or (claims)"
    " because they could not be served within their wait budget",
    ["priority"],
)
ADMISSION_CLAIMS_EXPIRED = Counter(
    "taskroute_admission_claims_expired_total",
    "Of the refused claims, those refused after waiting their whole budget"
    " (TASKROUTE_ADMISSION_CLAIM_WAIT) rather than at the door: these cost a request's work",
)
# Where a request's time goes before its SQL runs: the wait for a connection slot (a claim
# waits behind heartbeats and submits by design), and how late the process's event loop is.
_WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
ADMISSION_WAIT_SECONDS = Histogram(
    "taskroute_admission_wait_seconds",
    "Time from asking for a database connection slot to getting one, by priority (refusals"
    " and time-outs are not observed: they are counted by taskroute_admission_shed_total)",
    ["priority"],
    buckets=_WAIT_BUCKETS,
)
ADMISSION_HOLD_SECONDS = Histogram(
    "taskroute_admission_hold_seconds",
    "Time a request held its database connection slot, by priority: the SQL, the commit's"
    " WAL flush, and the process's own turns between statements",
    ["priority"],
    buckets=_WAIT_BUCKETS,
)
EVENT_LOOP_LAG_SECONDS = Histogram(
    "taskroute_event_loop_lag_seconds",
    "How much later than asked a 100 ms timer fires in a server process: time its event loop"
    " was busy with other work, which every request on the process also waits",
    buckets=_WAIT_BUCKETS,
)
JOB_PASS_SECONDS = Histogram(
    "taskroute_job_pass_seconds",
    "How long one pass of a background job took (sweeper, routing, deadline alerts, task-count"
    " compaction, table hygiene, ...), by job: a pass that runs long takes a database"
    " connection and Postgres CPU from requests for that long",
    ["job"],
    buckets=_WAIT_BUCKETS,
)
ADMISSION_WAITING = Gauge(
    "taskroute_admission_waiting",
    "Requests waiting for a database connection, by priority",
    ["priority"],
    **_LIVE_SUM_MODE,
)


def count_expired(rows: Any) -> None:
    """Count the rows `leases_release_expired` returned (each has a `status`)."""
    for row in rows:
        LEASE_EXPIRIES.labels(row["status"]).inc()


@contextlib.contextmanager
def timed(histogram: Histogram) -> Iterator[None]:
    """Observe the block's duration, labelled "ok" or with the error code it raised."""
    start = time.perf_counter()
    outcome = "ok"
    try:
        yield
    except TaskrouteError as exc:
        outcome = exc.code
        raise
    except BaseException:
        outcome = "INTERNAL"
        raise
    finally:
        histogram.labels(outcome).observe(time.perf_counter() - start)
