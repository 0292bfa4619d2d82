"""Planner statistics and dead rows, kept when the server does not.

Postgres keeps them with autovacuum (the baseline migration tunes `tasks` and `assignments` to a
fixed amount of churn). A server running with autovacuum off never refreshes them, and then a
table analyzed while nearly empty looks nearly empty for ever: plans cached on it (every PL/pgSQL
statement's) keep scanning the whole table for one row. The request path is written not to trust
the statistics where it can (queries/claims.sql), and tests/db/test_rows_read_on_a_churned_table.py
holds the jobs to the same bound, but a statement added later may not be. So when the server's
autovacuum is off (for the server or the table), this job does its work by autovacuum's own
formula, for every table (queries/hygiene.sql: hygiene_due): ANALYZE a table once it changed
enough, VACUUM (with ANALYZE) it once enough rows died or were inserted. With autovacuum on it
reads one catalogue row set per pass and does nothing.

Several processes may run it at once: SKIP_LOCKED makes a second VACUUM or ANALYZE of a table
already being processed a no-op instead of a wait. VACUUM cannot run inside a transaction, so
each statement runs on its own (also through a transaction-mode PgBouncer).
"""

from __future__ import annotations

import logging

from taskroute.db.pool import Database
from taskroute.db.queries import Q

log = logging.getLogger(__name__)


def _quoted(name: str) -> str:
    """The table name as an SQL identifier (the migrations' names are plain ones)."""
    if name.isidentifier() and name == name.lower():
        return name
    return '"' + name.replace('"', '""') + '"'


async def hygiene_once(db: Database) -> list[str]:
    """One pass; returns what it ran (e.g. ["VACUUM (ANALYZE, SKIP_LOCKED) tasks"])."""
    ran: list[str] = []
    async with db.connection() as conn:
        due = await conn.fetch(Q["hygiene_due"])
        for row in due:
            table = _quoted(row["table_name"])
            if row["vacuum"]:
                statement = f"VACUUM (ANALYZE, SKIP_LOCKED) {table}"
            elif row["analyze"]:
                statement = f"ANALYZE (SKIP_LOCKED) {table}"
            else:
                continue
            await conn.execute(statement)
            ran.append(statement)
    if ran:
        log.info("table hygiene (server autovacuum off): %s", "; ".join(ran))
    return ran
