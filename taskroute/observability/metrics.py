"""Prometheus metrics, served at /metrics.

Counters and histograms are updated where things happen (claims, submits, sweeps). Gauges that
describe the database (open tasks by skill, ingest lag) are refreshed when /metrics is scraped,
at most once per `DB_GAUGE_TTL` seconds and under a statement timeout, so scraping stays cheap
however often Prometheus (or several of them) asks.

Several server processes (`taskroute serve --workers N`): each process counts its own requests.
Without configuration a scrape sees one worker; set `PROMETHEUS_MULTIPROC_DIR` to an empty
directory before starting the server and /metrics aggregates all workers (prometheus_client's
multiprocess mode; the database gauges are then reported by the scraped worker, `mostrecent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _mp
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.db.queries import Q
from taskroute.errors import TaskrouteError

if TYPE_CHECKING:
    from taskroute.services import Services

log = logging.getLogger(__name__)

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
_GAUGE_MODE: dict[str, Any] = {"multiprocess_mode": "mostrecent"} if MULTIPROCESS else {}
_LIVE_SUM_MODE: dict[str, Any] = {"multiprocess_mode": "livesum"} if MULTIPROCESS else {}

CLAIMS = Counter(
    "taskroute_claims_total",
    "Claims that handed a task to an expert (outcome: new claim, or the expert's held one)",
    ["outcome"],
)
CLAIMS_EMPTY = Counter("taskroute_claims_empty_total", "Claims that found nothing to do")
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
# Admission (admission.py): requests refused at once, and requests waiting at scrape time.
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

# Seconds between database queries for the scrape-time gauges.
DB_GAUGE_TTL = 10.0
# A scrape never waits longer than this for the database.
DB_GAUGE_TIMEOUT = 2.0
# At most this many skills are reported (the rest are summed under "_other").
MAX_SKILL_SERIES = 500


def count_expired(rows: Any) -> None:
    """Count the rows `leases_release_expired` returned (each has a `status`)."""
    for row in rows:
        LEASE_EXPIRIES.labels(row["status"]).inc()


class _DbGauges:
    def __init__(self) -> None:
        self.refreshed_at = 0.0
        self.skills: set[str] = set()
        self.lock = asyncio.Lock()

    async def refresh(self, services: Services) -> None:
        if time.monotonic() - self.refreshed_at < DB_GAUGE_TTL:
            return
        async with self.lock:
            if time.monotonic() - self.refreshed_at < DB_GAUGE_TTL:
                return
            self.refreshed_at = time.monotonic()
            try:
                async with services.db.connection() as conn, conn.transaction(readonly=True):
                    await conn.execute(Q["metrics_statement_timeout"])
                    open_rows = await conn.fetch(Q["metrics_open_tasks_by_skill"])
                    lag = await conn.fetchval(Q["metrics_ingest_lag"])
            except Exception as exc:  # a slow or absent database must not break scraping
                log.warning("metrics: database gauges not refreshed: %s", type(exc).__name__)
                return
            counts: dict[str, int] = {}
            for i, row in enumerate(open_rows):
                key = row["skill"] if i < MAX_SKILL_SERIES else "_other"
                counts[key] = counts.get(key, 0) + row["n"]
            for gone in self.skills - set(counts):
                OPEN_TASKS.remove(gone)
            for skill, n in counts.items():
                OPEN_TASKS.labels(skill).set(n)
            self.skills = set(counts)
            INGEST_LAG.set(float(lag or 0.0))


_db_gauges = _DbGauges()


def _registry() -> CollectorRegistry | None:
    if not MULTIPROCESS:
        return None  # the default registry
    registry = CollectorRegistry()
    _mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # untyped upstream
    return registry


def _scraper_allowed(request: Request, settings: Any) -> bool:
    """The metrics token or the admin token, compared in constant time."""
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return False
    given = token.strip().encode()
    allowed = [t for t in (settings.metrics_token, settings.admin_token) if t]
    return any(hmac.compare_digest(given, t.encode()) for t in allowed)


async def metrics_endpoint(request: Request) -> Response:
    services: Services = request.state.services
    if not _scraper_allowed(request, services.settings):
        message = "/metrics needs Authorization: Bearer <metrics or admin token>"
        body = {"error": {"code": "UNAUTHENTICATED", "message": message}}
        return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
    pool = services.db.pool
    POOL_SIZE.labels("total").set(pool.get_size())
    POOL_SIZE.labels("idle").set(pool.get_idle_size())
    admission = services.db.admission
    if admission is not None:
        for priority, n in admission.waiting_by_priority().items():
            ADMISSION_WAITING.labels(priority.name.lower()).set(n)
    try:
        await asyncio.wait_for(_db_gauges.refresh(services), DB_GAUGE_TIMEOUT + 1)
    except TimeoutError:
        log.warning("metrics: database gauges timed out")
    registry = _registry()
    exposition = generate_latest(registry) if registry is not None else generate_latest()
    return Response(exposition, media_type=CONTENT_TYPE_LATEST)


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
