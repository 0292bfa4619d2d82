"""Writes schema.sql: the schema the migrations produce (tables, indexes, triggers, functions),
as pg_dump prints it from a freshly migrated database. A reviewer reads one file instead of
every migration; tests/db/test_schema_sql_is_fresh.py fails while it is stale.

    .venv/bin/python scripts/schema_sql.py [--admin-dsn postgresql://root@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskroute.db.migrate import migrate_url  # noqa: E402

SCHEMA_SQL = ROOT / "schema.sql"
DEFAULT_ADMIN_DSN = os.environ.get("TASKROUTE_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
HEADER = (
    "-- The schema the migrations produce (taskroute/db/migrations, then db/functions), as\n"
    "-- pg_dump prints it. Generated: .venv/bin/python scripts/schema_sql.py. Do not edit.\n"
)
# pg_dump's lines that depend on the tool's version, not on the schema.
_VOLATILE = re.compile(r"^(-- Dumped (from|by) .*|\\(un)?restrict .*)$")


def _dsn(base: str, dbname: str) -> str:
    return base.rsplit("/", 1)[0] + "/" + dbname


def normalize(dump: str) -> str:
    lines = [line for line in dump.splitlines() if not _VOLATILE.match(line)]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return HEADER + "\n" + text + "\n"


async def dump_migrated(admin_dsn: str) -> str:
    """Migrate a new empty database, dump its schema, drop it."""
    name = f"taskroute_schema_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
        try:
            url = _dsn(admin_dsn, name)
            await migrate_url(url)
            out = await asyncio.to_thread(
                subprocess.run,
                ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", url],
                check=True,
                capture_output=True,
                text=True,
            )
            return normalize(out.stdout)
        finally:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-dsn", default=DEFAULT_ADMIN_DSN)
    args = parser.parse_args()
    SCHEMA_SQL.write_text(asyncio.run(dump_migrated(args.admin_dsn)))
    print(f"wrote {SCHEMA_SQL.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
