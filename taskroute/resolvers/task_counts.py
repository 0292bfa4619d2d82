"""Folding the task-count deltas into the counts, one process at a time.

The tasks triggers append a delta per statement instead of updating a counter row, so claims
of one project never queue behind each other on a hot row. Reads sum the folded count and the
deltas, so they are exact whenever this runs; it only keeps the deltas few (cheap to sum).
"""

from __future__ import annotations

import logging

from taskroute.db.pool import Database
from taskroute.db.queries import Q

log = logging.getLogger(__name__)

# Arbitrary constant naming "the task-count compactor" among advisory locks.
COMPACT_LOCK_KEY = 0x7A5C0015


async def compact_once(db: Database) -> int | None:
    """Fold every committed delta; the number folded, or None if another process is at it."""
    async with db.transaction() as conn:
        if not await conn.fetchval(Q["advisory_xact_try_lock"], COMPACT_LOCK_KEY):
            return None
        folded: int = await conn.fetchval(Q["task_counts_compact"])
    return folded
