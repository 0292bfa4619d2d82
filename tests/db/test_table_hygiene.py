"""Tables' statistics and dead rows, kept by the service when the server's autovacuum does not
(resolvers/table_hygiene.py): by the per-table thresholds of the baseline migration, and by
autovacuum's default formula for every other table."""

from __future__ import annotations

import asyncpg

from taskroute.db.pool import Database
from taskroute.resolvers.jobs.table_hygiene import hygiene_once

from ..helpers import wait_for

STATS = (
    "SELECT n_mod_since_analyze, n_dead_tup, last_analyze, last_vacuum"
    " FROM pg_stat_user_tables WHERE relname = $1"
)


async def _add_tasks(db: asyncpg.Connection, project: str, n: int) -> None:
    await db.execute(
        """
        WITH i AS (
            INSERT INTO items (project_id, skill, payload)
            SELECT $1, 'label', '{}'::jsonb FROM generate_series(1, $2::int)
            RETURNING id
        )
        INSERT INTO tasks (item_id, project_id, skill, status)
        SELECT id, $1, 'label', 'open' FROM i
        """,
        project,
        n,
    )


async def _stats_once_flushed(
    db: asyncpg.Connection, check: str, table: str = "tasks"
) -> asyncpg.Record:
    """This session's counters of `table`, once the shared statistics show them (`check` says
    which condition means they arrived)."""
    await db.execute("SELECT pg_stat_force_next_flush()")

    async def seen() -> asyncpg.Record | None:
        found: asyncpg.Record | None = await db.fetchrow(
            f"SELECT * FROM ({STATS}) s WHERE {check}", table
        )
        return found

    row: asyncpg.Record = await wait_for(seen, f"the statistics to show {check}")
    return row


async def test_the_job_analyzes_then_vacuums_tasks_by_their_thresholds(
    db: asyncpg.Connection, jobs_db: Database
) -> None:
    # Autovacuum off for this table, whatever the server's setting: the job must act.
    await db.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")
    customer = await db.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
    project = await db.fetchval(
        "INSERT INTO projects (customer_id, name) VALUES ($1, 'p') RETURNING id", customer
    )

    # Below the thresholds (5,000 changes; 5,000 dead rows): nothing to do.
    await _add_tasks(db, project, 100)
    await _stats_once_flushed(db, "n_mod_since_analyze >= 100")
    assert not [s for s in await hygiene_once(jobs_db) if s.endswith(" tasks")]

    # 5,000 more inserted rows: an analyze is due (inserts leave no dead rows).
    await _add_tasks(db, project, 5000)
    await _stats_once_flushed(db, "n_mod_since_analyze >= 5100")
    assert "ANALYZE (SKIP_LOCKED) tasks" in await hygiene_once(jobs_db)
    analyzed = await _stats_once_flushed(db, "last_analyze IS NOT NULL")
    assert analyzed["n_mod_since_analyze"] == 0
    assert analyzed["last_vacuum"] is None
    assert await db.fetchval("SELECT reltuples FROM pg_class WHERE relname = 'tasks'") >= 5100

    # Every task rewritten: 5,100 dead rows, so a vacuum (with its analyze) is due.
    await db.execute("UPDATE tasks SET priority = priority + 1")
    await _stats_once_flushed(db, "n_dead_tup >= 5100")
    assert "VACUUM (ANALYZE, SKIP_LOCKED) tasks" in await hygiene_once(jobs_db)
    vacuumed = await _stats_once_flushed(db, "last_vacuum IS NOT NULL")
    assert vacuumed["n_dead_tup"] == 0

    # Done: the next pass has nothing left for tasks.
    assert not [s for s in await hygiene_once(jobs_db) if s.endswith(" tasks")]


async def test_every_other_table_follows_autovacuums_default_formula(
    db: asyncpg.Connection, jobs_db: Database
) -> None:
    """A table the migrations did not tune (customers here) is analyzed as autovacuum would:
    after threshold + scale factor x rows changes (50 + 0.1 x rows by default), so a table
    analyzed while nearly empty is analyzed again as it grows, and cached plans are redone."""
    await db.execute("ALTER TABLE customers SET (autovacuum_enabled = false)")
    threshold = float(await db.fetchval("SELECT current_setting('autovacuum_analyze_threshold')"))
    scale = float(await db.fetchval("SELECT current_setting('autovacuum_analyze_scale_factor')"))

    async def flushed(check: str) -> asyncpg.Record:
        return await _stats_once_flushed(db, check, "customers")

    async def add(n: int) -> None:
        await db.execute(
            "INSERT INTO customers (name) SELECT 'c' || g FROM generate_series(1, $1::int) g", n
        )

    # Never analyzed: due once `threshold` rows changed, not before.
    below = int(threshold) - 1
    await add(below)
    await flushed(f"n_mod_since_analyze >= {below}")
    assert "ANALYZE (SKIP_LOCKED) customers" not in await hygiene_once(jobs_db)
    await add(1)
    await flushed(f"n_mod_since_analyze >= {below + 1}")
    assert "ANALYZE (SKIP_LOCKED) customers" in await hygiene_once(jobs_db)
    await flushed("last_analyze IS NOT NULL AND n_mod_since_analyze = 0")

    # Now the scale factor counts the rows it saw: 10x the rows need threshold + 0.1 x rows.
    rows = await db.fetchval("SELECT reltuples FROM pg_class WHERE relname = 'customers'")
    assert rows >= threshold
    await add(int(threshold))
    await flushed(f"n_mod_since_analyze >= {int(threshold)}")
    due_at = threshold + scale * rows
    ran = await hygiene_once(jobs_db)
    assert ("ANALYZE (SKIP_LOCKED) customers" in ran) == (threshold >= due_at)
    await add(int(due_at - threshold) + 1)
    await flushed(f"n_mod_since_analyze >= {int(due_at) + 1}")
    assert "ANALYZE (SKIP_LOCKED) customers" in await hygiene_once(jobs_db)
