"""Background sweeper: returns expired leases to the pool, one process at a time."""

from __future__ import annotations

import logging
from datetime import datetime

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.observability import metrics
from taskroute.realtime import notify
from taskroute.resolvers.claims import SWEEP_BATCH
from taskroute.resolvers.projects import settle

log = logging.getLogger(__name__)

# Arbitrary constant naming "the lease sweeper" among advisory locks.
SWEEP_LOCK_KEY = 0x7A5C0002


async def sweep_once(db: Database, clock: datetime | None = None) -> int:
    """Release expired leases if no other process is sweeping; return how many.

    `clock` (default: the database's now()) decides who counts as silent, so a simulator can
    sweep on simulated time."""
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], SWEEP_LOCK_KEY):
            return 0
        # Claims of experts silent past the project's heartbeat timeout end now, while their
        # lease may run for long after; the release below returns them (an attempt, a wake-up).
        await conn.fetch(Q["leases_expire_absent"], clock)
        released = await conn.fetch(Q["leases_release_expired"], SWEEP_BATCH, None)
        # a slot out of retries may have been its project's last work
        await settle(conn, [r["project_id"] for r in released if r["status"] == "failed"], True)
        await notify.leases_released(conn, released)
    metrics.count_expired(released)
    notify.progress_changed(*{r["project_id"] for r in released})
    if released:
        log.info("sweeper released %d expired leases", len(released))
    return len(released)


async def sweep_pass(db: Database) -> bool:
    """One sweep for the background jobs (jobs.py); True when the batch was full, so more
    expired leases are waiting."""
    return await sweep_once(db) == SWEEP_BATCH
