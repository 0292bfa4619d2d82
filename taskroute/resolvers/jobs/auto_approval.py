"""Auto-approval: on_review work past its project's delay is approved, and gold answers waiting
for a twin are decided; one process at a time (advisory lock), beside the lease sweeper.
"""

from __future__ import annotations

import logging

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.realtime import notify
from taskroute.resolvers import acceptance

log = logging.getLogger(__name__)

# Arbitrary constant naming "the auto-approval job" among advisory locks.
AUTO_APPROVE_LOCK_KEY = 0x7A5C0020


AUTO_APPROVE_BATCH = 500


async def auto_approve_once(db: Database) -> int:
    """Decide on_review work past its project's auto-approval delay, and on_acceptance gold
    answers still waiting for a twin (functions/quality.sql taskroute_gold_submitted), if no
    other process is doing it; return how many assignments were decided."""
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], AUTO_APPROVE_LOCK_KEY):
            return 0
        rows = await conn.fetch(Q["assignments_auto_approve"], AUTO_APPROVE_BATCH)
        closed = await acceptance.close_reviews(conn, [r["id"] for r in rows])
        await conn.execute(Q["gold_twins_link"], AUTO_APPROVE_BATCH)
    notify.progress_changed(*closed)
    # Deciding locks a gold assignment, then its exposure row, as a twin's trigger does: in a
    # transaction of its own, so the exposure rows the link locked are not held meanwhile.
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], AUTO_APPROVE_LOCK_KEY):
            return len(rows)
        due = await conn.fetch(Q["gold_decisions_due"], AUTO_APPROVE_BATCH)
        gold = [r["assignment_id"] for r in due]
        if gold:
            await conn.execute(Q["gold_decide_call"], gold)
    if rows or gold:
        log.info("auto-approval decided %d assignments, %d gold answers", len(rows), len(gold))
    return len(rows) + len(gold)


async def auto_approve_pass(db: Database) -> bool:
    """One auto-approval batch for the background jobs (jobs.py); True when it was full."""
    return await auto_approve_once(db) >= AUTO_APPROVE_BATCH
