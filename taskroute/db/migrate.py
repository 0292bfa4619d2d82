"""Forward-only numbered migrations (`migrations/NNNN_name.sql`), recorded in a table, then
the database functions of `functions/*.sql`.

Tables change only through numbered migrations. The functions (the claim loop's one-round-trip
calls and the quality rules) are code: they are spliced from the named blocks of
`queries/*.sql` and reinstalled whenever their text changes, so they never drift from the
statements the application and its EXPLAIN tests run. Reinstalling drops and recreates them
in one transaction (callers see the old or the new set, never a gap). A rolling deploy whose
function signatures change must not mix old and new processes.

Safe when several processes start at once: the whole run holds an advisory lock.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import asyncpg

from taskroute.db.queries import BLOCKS, splice

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
FUNCTIONS = Path(__file__).parent / "functions"
_FUNCTION_NAME = re.compile(r"^CREATE FUNCTION (\w+)\(", re.MULTILINE)
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
        await install_functions(conn)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied


def functions_sql() -> str:
    """Every `functions/*.sql` file, spliced, in name order."""
    texts = [splice(path.read_text(), BLOCKS) for path in sorted(FUNCTIONS.glob("*.sql"))]
    return "\n\n".join(texts)


async def install_functions(conn: asyncpg.Connection) -> bool:
    """(Re)install the functions if their text changed since the last install."""
    sql = functions_sql()
    digest = hashlib.sha256(sql.encode()).hexdigest()
    names = sorted(set(_FUNCTION_NAME.findall(sql)))
    await conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_functions (
               singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
               digest text NOT NULL,
               names text[] NOT NULL,
               installed_at timestamptz NOT NULL DEFAULT now())"""
    )
    current = await conn.fetchrow("SELECT digest, names FROM schema_functions")
    if current is not None and current["digest"] == digest:
        return False
    old_names = list(current["names"]) if current is not None else []
    async with conn.transaction():
        # One DROP for all of them: functions with SQL bodies depend on each other.
        existing = await conn.fetch(
            "SELECT oid::regprocedure::text AS sig FROM pg_proc"
            " WHERE proname = ANY ($1::text[]) AND pronamespace = current_schema()::regnamespace",
            sorted(set(names) | set(old_names)),
        )
        if existing:
            await conn.execute("DROP FUNCTION " + ", ".join(r["sig"] for r in existing))
        await conn.execute(sql)
        await conn.execute(
            """INSERT INTO schema_functions (digest, names) VALUES ($1, $2)
               ON CONFLICT (singleton) DO UPDATE
               SET digest = EXCLUDED.digest, names = EXCLUDED.names, installed_at = now()""",
            digest,
            names,
        )
    log.info("installed database functions %s", ", ".join(names))
    return True


async def migrate_url(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return await migrate(conn)
    finally:
        await conn.close()
