"""How long a forecast and a full deadline evaluation take on a populated database.

    PYTHONPATH=. python bench/forecast_bench.py [--projects 50] [--tasks 2000] [--experts 200]

Creates a scratch database next to the admin DSN (TASKROUTE_TEST_PG or postgres@127.0.0.1),
fills it with generate_series (projects with deadlines, open/claimed/done tasks, experts with
skills, an hour of submissions), prints timings, and drops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import asyncpg

from taskroute.config import Settings
from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool
from taskroute.db.queries import Q
from taskroute.resolvers.alerts import evaluate
from taskroute.resolvers.forecast import forecasts

ADMIN = os.environ.get("TASKROUTE_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/postgres"
SKILLS = ["grading", "ranking", "labeling", "review", "translate"]

FILL = """
INSERT INTO customers (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'bench');
INSERT INTO projects (customer_id, name, deadline)
SELECT '00000000-0000-0000-0000-000000000001', 'p' || g, now() + (g % 48 + 1) * interval '1 hour'
FROM generate_series(1, {projects}) g;
INSERT INTO items (project_id, skill, payload)
SELECT p.id, ({skills}::text[])[1 + (g % 5)], '{{}}'::jsonb
FROM projects p CROSS JOIN generate_series(1, {tasks}) g;
INSERT INTO tasks (item_id, project_id, skill, status)
SELECT i.id, i.project_id, i.skill,
       (ARRAY['open', 'open', 'open', 'done', 'claimed'])[1 + abs(hashtext(i.id::text)) % 5]
FROM items i;
INSERT INTO experts (name, last_seen_at)
SELECT 'e' || g, now() - (g % 30) * interval '1 minute' FROM generate_series(1, {experts}) g;
INSERT INTO expert_skills (expert_id, skill)
SELECT e.id, s FROM experts e CROSS JOIN unnest({skills}::text[]) s
WHERE abs(hashtext(e.id::text || s)) % 3 = 0;
INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, status, lease_until,
                         submitted_at, receipt_id, pay_cents)
SELECT gen_random_uuid(), t.id, t.item_id, t.project_id,
       (SELECT id FROM experts ORDER BY id OFFSET abs(hashtext(t.id::text)) % {experts} LIMIT 1),
       'submitted', now(), now() - (abs(hashtext(t.id::text)) % 3600) * interval '1 second',
       gen_random_uuid(), 0
FROM tasks t WHERE t.status = 'done';
ANALYZE;
"""


async def main(args: argparse.Namespace) -> None:
    name = f"taskroute_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = ADMIN.rsplit("/", 1)[0] + "/" + name
    try:
        await migrate_url(dsn)
        conn = await asyncpg.connect(dsn)
        t0 = time.perf_counter()
        await conn.execute("SET synchronous_commit = off")
        # Bench-only SQL from trusted integers and constants.
        skills = "ARRAY[" + ",".join(f"'{s}'" for s in SKILLS) + "]"
        fill = FILL.format(
            projects=int(args.projects),
            tasks=int(args.tasks),
            experts=int(args.experts),
            skills=skills,
        )
        async with conn.transaction():
            await conn.execute(fill)
        counts = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM tasks) t, (SELECT count(*) FROM assignments) a"
        )
        print(
            f"filled {args.projects} projects, {counts['t']} tasks, {args.experts} experts, "
            f"{counts['a']} submissions in {time.perf_counter() - t0:.1f}s"
        )
        settings = Settings(database_url=dsn)
        one = await conn.fetchval("SELECT id FROM projects ORDER BY id LIMIT 1")
        if args.explain:
            plan = await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS) " + Q["forecast_skills"],
                one,
                settings.forecast_window,
                settings.forecast_presence,
            )
            print("\n".join(r[0] for r in plan))
        samples = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            await forecasts(conn, settings, one)
            samples.append((time.perf_counter() - t) * 1000)
        print(
            f"forecast(one project): median {statistics.median(samples):.1f} ms, "
            f"max {max(samples):.1f} ms over {args.repeat} runs"
        )
        await conn.close()
        pool = await create_pool(dsn, 1, 2)
        db = Database(pool, 10)
        samples = []
        for _ in range(max(1, args.repeat // 4)):
            t = time.perf_counter()
            await evaluate(db, settings, wait=True)
            samples.append((time.perf_counter() - t) * 1000)
        alerts = await db.fetchval("SELECT count(*) FROM project_alerts")
        print(
            f"evaluate(all {args.projects} projects): median {statistics.median(samples):.1f} ms,"
            f" max {max(samples):.1f} ms; {alerts} alerts recorded"
        )
        await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--experts", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--explain", action="store_true", help="print the forecast's plan")
    asyncio.run(main(parser.parse_args()))
