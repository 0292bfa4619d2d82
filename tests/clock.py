"""The database clock a test controls: `taskroute_now()` (functions/clock.sql) shifted per database.

Every statement that decides time reads `taskroute_now()`. Production never touches it (it is
now(), inlined). A test redefines it in its own database as now() plus an offset: one DDL
statement, seen by every connection (the server's pool too) at its next statement because
Postgres invalidates the cached plans that inlined it. Other tests' databases are untouched.
"""

from __future__ import annotations

import asyncpg

_DEFINE = """CREATE OR REPLACE FUNCTION taskroute_now() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() + make_interval(secs => {offset!r}) $$"""


class DbClock:
    """Moves one test database's clock forward (never back: leases only ever run out)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.offset = 0.0

    async def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self.offset += seconds
        # A float literal: the offset is ours, never input, so formatting it in is safe.
        await self.conn.execute(_DEFINE.format(offset=float(self.offset)))
