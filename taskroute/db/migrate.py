"""Forward-only numbered migrations (`migrations/NNNN_name.sql`), recorded in a table.

Safe when several processes start at once: the whole run holds an advisory lock.
"""

from __future__ import annotations

import logging
from pathlib import Path

import asyncpg

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
# Arbitrary constant identifying "taskroute migrations" among advisory locks.
_LOCK_KEY = 0x7A5C0001


def available() -> list[tuple[int, str, Path]]:
    found = []
    for path in sorted(MIGRATIONS.glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path))
    return found


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply every migration not yet recorded; return the versions applied."""
    applied: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, path in available():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(path.read_text())
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            log.info("applied migration %04d_%s", version, name)
            applied.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied


async def migrate_url(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()
