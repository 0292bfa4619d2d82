"""/metrics: the registry of `taskroute.observability.metrics`, for Prometheus.

Gauges that describe the database (open tasks by skill, ingest lag) are refreshed when /metrics
is scraped, at most once per `DB_GAUGE_TTL` seconds and under a statement timeout, so scraping
stays cheap however often Prometheus (or several of them) asks. With `PROMETHEUS_MULTIPROC_DIR`
set, a scrape aggregates every worker process (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import multiprocess as _mp
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.db.queries import Q
from taskroute.observability.metrics import (
    ADMISSION_WAITING,
    INGEST_LAG,
    MULTIPROCESS,
    OPEN_TASKS,
    POOL_SIZE,
)
from taskroute.resolvers.services import Services

log = logging.getLogger(__name__)

# Seconds between database queries for the scrape-time gauges.
DB_GAUGE_TTL = 10.0
# A scrape never waits longer than this for the database.
DB_GAUGE_TIMEOUT = 2.0
# At most this many skills are reported (the rest are summed under "_other").
MAX_SKILL_SERIES = 500


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
