"""How long a forecast and a full deadline evaluation take on a populated database.

    PYTHONPATH=. python bench/forecast_bench.py [--projects 50] [--tasks 2000] [--experts 200]
    PYTHONPATH=. python bench/forecast_bench.py --accuracy [--seeds 8]

The second form measures how right the forecast is, not how fast (see `accuracy`).

Creates a scratch database next to the admin DSN (TASKROUTE_TEST_PG or postgres@127.0.0.1),
fills it with generate_series (projects with deadlines, open/claimed/done tasks, experts with
skills, an hour of submissions), prints timings, and drops it.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import math
import os
import random
import statistics
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import asyncpg

from taskroute.config import Settings
from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool
from taskroute.db.queries import Q, load
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
                settings.forecast_presence,
                None,
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


# --- forecast accuracy (issue 17) ------------------------------------------------------------
#
#   PYTHONPATH=. python bench/forecast_bench.py --accuracy [--seeds 8]
#
# Experts of known pace work through a project with the application's own claim and submit
# (one round trip each); the simulator restamps what they wrote with its clock, and asks the
# forecast (resolvers/forecast.py) and the deadline evaluator (resolvers/alerts.py) on that
# clock when 10%, 30% and 60% of the work is done. Relative error of an ETA = |predicted
# remaining time - actual remaining time| / actual remaining time; the naive forecast is
# "remaining / rate since the project started".

BQ = load(Path(__file__).parent / "sql")
CHECKPOINTS = (0.1, 0.3, 0.6)
MEAN_CYCLE = 60.0  # seconds per task of a typical expert: human speed
TASK_CV = 0.3  # spread of one expert's task durations (lognormal)


@dataclass
class Scenario:
    name: str
    experts: int
    tasks: int
    # (fraction of the work done, event, how many experts, factor)
    events: list[tuple[float, str, int, float]] = field(default_factory=list)
    missing_skill: int = 0  # tasks of a second skill nobody holds
    deadline_factor: float = 1.3  # deadline = planned duration (initial experts) x this


SCENARIOS = [
    Scenario("steady", 5, 300),
    Scenario("arrivals", 2, 300, [(0.15, "arrive", 4, 1.0)], deadline_factor=0.8),
    Scenario("departures", 6, 300, [(0.15, "leave", 3, 1.0)], deadline_factor=1.3),
    Scenario("pace change", 4, 300, [(0.15, "pace", 4, 2.0)], deadline_factor=1.5),
    Scenario("no expert for a skill", 4, 200, missing_skill=40, deadline_factor=2.0),
]


@dataclass
class Run:
    errors: dict[float, float] = field(default_factory=dict)  # checkpoint -> our error
    naive: dict[float, float] = field(default_factory=dict)
    unknown: dict[float, str] = field(default_factory=dict)  # checkpoint -> reason
    alerted: bool = False
    missed: bool = False


async def run_scenario(
    conn: asyncpg.Connection, db: Database, sc: Scenario, seed: int, settings: Settings
) -> Run:
    rng = random.Random(seed)
    tag = f"{sc.name.replace(' ', '_')}_{seed}"
    skill, rare = f"grading_{tag}", f"review_{tag}"
    start = await conn.fetchval("SELECT now() + interval '1 second'")
    planned = sc.tasks * MEAN_CYCLE / sc.experts
    deadline = start + timedelta(seconds=planned * sc.deadline_factor)
    customer = await conn.fetchval("SELECT id FROM customers LIMIT 1")
    pid = await conn.fetchval(BQ["fa_project"], customer, tag, deadline, start)
    await conn.execute(BQ["fa_tasks"], pid, skill, sc.tasks)
    if sc.missing_skill:
        await conn.execute(BQ["fa_tasks"], pid, rare, sc.missing_skill)
    total = sc.tasks + sc.missing_skill

    pace: dict[uuid.UUID, float] = {}  # expert -> mean seconds per task
    leaving: set[uuid.UUID] = set()
    events: list[tuple[float, int, str, uuid.UUID]] = []
    order = itertools.count()

    async def add_expert(at: float) -> None:
        eid = await conn.fetchval(
            BQ["fa_expert"], f"e{next(order)}", [skill], start + timedelta(seconds=at)
        )
        pace[eid] = MEAN_CYCLE * rng.uniform(0.7, 1.4)
        heapq.heappush(events, (at, next(order), "claim", eid))

    for _ in range(sc.experts):
        await add_expert(rng.uniform(0, 5))
    pending = sorted(sc.events)
    done = 0
    asks: list[tuple[float, float, float | None, str | None, float]] = []
    held: dict[uuid.UUID, uuid.UUID] = {}
    now = 0.0
    next_check = 0
    while events:
        now, _, kind, eid = heapq.heappop(events)
        clock = start + timedelta(seconds=now)
        if kind == "claim":
            if eid in leaving:
                await conn.execute(BQ["fa_leave"], eid, clock)
                continue
            row = await conn.fetchrow(Q["claim_call"], eid, None, None, 1.0, 10)
            if row["outcome"] != "claimed":
                continue  # nothing left for this expert: they go idle
            await conn.execute(BQ["fa_stamp_claim"], row["assignment_id"], eid, clock)
            held[eid] = row["assignment_id"]
            took = pace[eid] * rng.lognormvariate(-(TASK_CV**2) / 2, TASK_CV)
            heapq.heappush(events, (now + took, next(order), "submit", eid))
        else:
            aid = held.pop(eid)
            row = await conn.fetchrow(Q["submit_call"], aid, eid, '{"ok": true}')
            assert row["outcome"] == "stored", row["outcome"]
            await conn.execute(BQ["fa_stamp_submit"], aid, eid, clock)
            done += 1
            # a few seconds to read the next task's instructions
            heapq.heappush(events, (now + rng.uniform(1, 4), next(order), "claim", eid))
            while pending and done >= pending[0][0] * sc.tasks:
                _, what, n, factor = pending.pop(0)
                if what == "arrive":
                    for _ in range(n):
                        await add_expert(now + rng.uniform(0, 30))
                elif what == "leave":
                    leaving.update(rng.sample(sorted(pace), n))
                else:
                    for e in rng.sample(sorted(pace), n):
                        pace[e] *= factor
            while next_check < len(CHECKPOINTS) and done >= CHECKPOINTS[next_check] * total:
                next_check += 1
                (f,) = await forecasts(conn, settings, pid, clock)
                await evaluate(db, settings, wait=True, clock=clock)
                eta = (f.eta - clock).total_seconds() if f.eta else None
                naive = (total - done) * now / done
                asks.append((CHECKPOINTS[next_check - 1], now, eta, "; ".join(f.reasons), naive))
            if sc.missing_skill and done >= CHECKPOINTS[-1] * total:
                await evaluate(db, settings, wait=True, clock=clock)
    progress = await conn.fetchrow(BQ["fa_progress"], pid)
    finished = now if progress["done"] == progress["total"] else math.inf
    run = Run()
    run.missed = start + timedelta(seconds=finished) > deadline if finished < math.inf else True
    run.alerted = bool(
        await conn.fetchval(
            "SELECT count(*) FROM project_alerts WHERE project_id = $1 AND kind = 'at_risk'", pid
        )
    )
    for at, t, eta, reason, naive in asks:
        actual = finished - t
        if eta is None:
            run.unknown[at] = reason or "unknown"
            run.errors[at] = 0.0 if actual == math.inf else math.inf
        else:
            run.errors[at] = abs(eta - actual) / actual if actual < math.inf else math.inf
        run.naive[at] = abs(naive - actual) / actual if actual < math.inf else math.inf
    return run


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _fmt(x: float) -> str:
    return "   inf" if x == math.inf else f"{100 * x:5.1f}%"


async def accuracy(args: argparse.Namespace) -> None:
    name = f"taskroute_fbench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = ADMIN.rsplit("/", 1)[0] + "/" + name
    try:
        await migrate_url(dsn)
        conn = await asyncpg.connect(dsn)
        await conn.execute("SET synchronous_commit = off")
        await conn.execute("INSERT INTO customers (name) VALUES ('bench')")
        pool = await create_pool(dsn, 1, 2)
        db = Database(pool, 30)
        settings = Settings(database_url=dsn)
        print(
            f"forecast accuracy: {args.seeds} seeds per scenario, experts of mean cycle "
            f"{MEAN_CYCLE:.0f} s (x U(0.7, 1.4) each, task CV {TASK_CV}); presence "
            f"{settings.forecast_presence:.0f} s, history {settings.forecast_window:.0f} s"
        )
        print(
            f"{'scenario':<24}{'at':>5}  {'taskroute med':>13}{'p90':>8}  "
            f"{'naive med':>9}{'p90':>8}  unknown (reason)"
        )
        t0 = time.perf_counter()
        for sc in SCENARIOS:
            runs = [await run_scenario(conn, db, sc, seed, settings) for seed in range(args.seeds)]
            for at in CHECKPOINTS:
                ours = [r.errors[at] for r in runs if at in r.errors]
                naive = [r.naive[at] for r in runs if at in r.naive]
                reasons = sorted({r.unknown[at] for r in runs if at in r.unknown})
                unknown = f"{sum(at in r.unknown for r in runs)}/{len(runs)}"
                why = f" ({reasons[0]})" if reasons else ""
                print(
                    f"{sc.name:<24}{int(at * 100):>4}%  {_fmt(_pct(ours, 0.5)):>13}"
                    f"{_fmt(_pct(ours, 0.9)):>8}  {_fmt(_pct(naive, 0.5)):>9}"
                    f"{_fmt(_pct(naive, 0.9)):>8}  {unknown}{why}"
                )
            missed = sum(r.missed for r in runs)
            hit = sum(r.missed and r.alerted for r in runs)
            false = sum(r.alerted and not r.missed for r in runs)
            print(
                f"{'':<24}alerts: {hit}/{missed} projects that missed were alerted; "
                f"{false}/{len(runs) - missed} false alarms"
            )
        print(f"({time.perf_counter() - t0:.0f} s wall on a shared 2-core machine)")
        await pool.close()
        await conn.close()
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
    parser.add_argument("--accuracy", action="store_true", help="forecast accuracy, not speed")
    parser.add_argument("--seeds", type=int, default=8, help="runs per accuracy scenario")
    parsed = parser.parse_args()
    asyncio.run(accuracy(parsed) if parsed.accuracy else main(parsed))
