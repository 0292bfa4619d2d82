"""Postgres' work per expert cycle (issue 19), in load-independent figures.

Run by hand (never part of the test suite):

    PYTHONPATH=. .venv/bin/python bench/pg_cycle.py --cycles 1000 --warmup 500 --clients 32

In a fresh database on the Postgres at $TASKROUTE_TEST_PG (dropped at the end unless --keep):
seeds like bench/load.py (--tasks open tasks over --skills Zipf skills in --projects
projects, --clients experts holding 3 skills each), sets `pg_stat_statements.track = all` for
that database (nested statements counted), and starts `taskroute serve --workers 1` with the
forecast, routing and retention jobs parked (an hour apart: each runs once, at the start).
--clients experts then run claim -> heartbeat -> submit cycles through GraphQL with no think
time. After --warmup cycles it runs VACUUM ANALYZE (the steady state autovacuum or the hygiene
job keeps; --stale skips it), zeroes this database's pg_stat_statements, reads
pg_stat_user_tables, runs --cycles cycles and prints per cycle:
- from the three GraphQL calls' top-level statements (claim_call, heartbeat_call,
  submit_unless_schema_call; their figures include every nested statement and trigger): execution
  time, shared buffers hit / read / dirtied, WAL records and bytes;
- nested statements executed per cycle (the three calls' bodies and triggers, plus what the
  jobs still running nest), and the most expensive of them;
- tuples inserted / updated / HOT-updated per cycle, per table;
- CPU per cycle (user + system, read as bench/load.py reads it) of the server processes and
  of the bench database's Postgres backends: seconds, so they depend on the machine (compare
  runs of the same minutes).
Buffers, WAL records and tuples do not depend on the machine's load; times do. WAL bytes
include full-page images, so they jump when a checkpoint falls in the window.
Needs pg_stat_statements in shared_preload_libraries (the helpers' cluster on 5433 has it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from load import (  # noqa: E402
    ADMIN_DSN,
    ANSWER,
    CLAIM_Q,
    HEARTBEAT_Q,
    SUBMIT_Q,
    Http,
    backends,
    cpu_seconds,
    seed,
    start_server,
    tree,
)

from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.queries import Q  # noqa: E402

CALLS = {
    "claim": "claim_call",
    "heartbeat": "heartbeat_call",
    "submit": "submit_unless_schema_call",
}
# Jobs whose work does not follow the cycles; the count folding, the sweeper and table
# hygiene keep running (what the cycles' statements find depends on them).
PARKED = (
    "TASKROUTE_FORECAST_INTERVAL",
    "TASKROUTE_ROUTING_INTERVAL",
    "TASKROUTE_RETENTION_INTERVAL",
)
COLS = (
    "calls",
    "total_exec_time",
    "shared_blks_hit",
    "shared_blks_read",
    "shared_blks_dirtied",
    "wal_records",
    "wal_bytes",
)


async def expert_loop(port: int, token: str, cycles: int) -> int:
    http = Http(port, token)

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        # A refusal (UNAVAILABLE: the pool is busy) is retried; all three are safe to repeat.
        while True:
            _, _, answer = await http.post(body)
            errors = (answer or {}).get("errors")
            if not errors:
                return dict(answer["data"])
            if errors[0].get("extensions", {}).get("code") != "UNAVAILABLE":
                raise RuntimeError(f"{body['query']}: {errors}")
            await asyncio.sleep(0.05)

    done = 0
    try:
        while done < cycles:
            claim = (await call({"query": CLAIM_Q}))["claimNextTask"]
            if claim is None:
                raise RuntimeError("nothing to claim")
            a = claim["assignmentId"]
            await call({"query": HEARTBEAT_Q, "variables": {"a": a}})
            await call({"query": SUBMIT_Q, "variables": {"a": a, "x": ANSWER}})
            done += 1
    finally:
        if http.writer is not None:
            http.writer.close()
    return done


async def run_cycles(port: int, tokens: list[str], cycles: int) -> None:
    per = [cycles // len(tokens) + (i < cycles % len(tokens)) for i in range(len(tokens))]
    await asyncio.gather(*(expert_loop(port, t, n) for t, n in zip(tokens, per, strict=True)))


async def cpu_now(server_pid: int, dbname: str) -> tuple[float, float]:
    """CPU seconds so far of the server's processes and of the bench database's backends (the
    pools keep their connections for the whole window, so none is lost between readings)."""
    server = sum(cpu_seconds(tree(server_pid)).values())
    backend = sum(cpu_seconds(await backends(ADMIN_DSN, dbname)).values())
    return server, backend


async def tables(conn: asyncpg.Connection) -> dict[str, tuple[int, int, int]]:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = await conn.fetch(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
    )
    return {r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_hot_upd"]) for r in rows}


async def measure(args: argparse.Namespace) -> None:
    dbname = f"taskroute_pgcycle_{uuid.uuid4().hex[:8]}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + "/" + dbname
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    proc = None
    try:
        await admin.execute(f"ALTER DATABASE \"{dbname}\" SET pg_stat_statements.track = 'all'")
        await migrate_url(dsn)
        ns = argparse.Namespace(
            tasks=args.tasks, skills=args.skills, projects=args.projects, experts=args.clients
        )
        tokens = await seed(dsn, ns, random.Random(args.seed))
        for name in PARKED:
            os.environ[name] = "3600"
        sargs = argparse.Namespace(
            workers=1,
            pool_max=None,
            admission_queue=None,
            admission_claim_queue=None,
            admission_claim_wait=None,
        )
        proc, port = await start_server(dsn, sargs)
        conn = await asyncpg.connect(dsn)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        dbid = await conn.fetchval("SELECT oid FROM pg_database WHERE datname = $1", dbname)
        await run_cycles(port, tokens, args.warmup)
        if not args.stale:
            # A steady state: statistics and dead rows as autovacuum (or the hygiene job)
            # keeps them on a long-running service.
            await conn.execute("VACUUM ANALYZE")
        await asyncio.sleep(1.5)  # table counters reach shared memory within a second
        await conn.execute("SELECT pg_stat_statements_reset(0, $1::oid, 0)", dbid)
        t0 = await tables(conn)
        w = time.monotonic()
        cpu0 = await cpu_now(proc.pid, dbname)
        await run_cycles(port, tokens, args.cycles)
        cpu1 = await cpu_now(proc.pid, dbname)
        wall = time.monotonic() - w
        cpu = (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])
        await asyncio.sleep(1.5)
        t1 = await tables(conn)
        rows = await conn.fetch(
            "SELECT toplevel, query, " + ", ".join(COLS) + " FROM pg_stat_statements"
            " WHERE dbid = $1",
            dbid,
        )
        await conn.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if args.keep:
            print(f"kept database {dbname}")
        else:
            await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()
    report(args, rows, t0, t1, wall, cpu)


def report(
    args: argparse.Namespace,
    rows: list[Any],
    t0: dict[str, tuple[int, int, int]],
    t1: dict[str, tuple[int, int, int]],
    wall: float,
    cpu: tuple[float, float],
) -> None:
    n = args.cycles
    # pg_stat_statements stores the text with its constants as $n: matched by the blocks'
    # first lines (their comments, which are unique).
    heads = {Q[block].split("\n", 1)[0]: kind for kind, block in CALLS.items()}

    def kind_of(r: Any) -> str | None:
        return heads.get(r["query"].split("\n", 1)[0]) if r["toplevel"] else None

    print(
        f"bench/pg_cycle.py: {n} cycles (claim, heartbeat, submit) from {args.clients} experts"
        f" after {args.warmup} warm-up cycles; {args.tasks} tasks / {args.skills} skills /"
        f" {args.projects} projects; {wall:.1f} s wall"
    )
    print(
        f"CPU per cycle: server processes {cpu[0] * 1000 / n:.2f} ms,"
        f" the bench database's Postgres backends {cpu[1] * 1000 / n:.2f} ms"
        " (user + system; the load generator not included)"
    )
    print()
    print("per cycle, the three calls (top-level statements, nested work included):")
    print("| call | calls | exec ms | shared hit | read | dirtied | WAL records | WAL bytes |")
    print("|---|---|---|---|---|---|---|---|")
    total = dict.fromkeys(COLS, 0.0)
    for kind in CALLS:
        got = [r for r in rows if kind_of(r) == kind]
        s = {c: float(sum(r[c] for r in got)) for c in COLS}
        for c in COLS:
            total[c] += s[c]
        print(_line(kind, s, n))
    print(_line("cycle", total, n))
    other = [r for r in rows if r["toplevel"] and kind_of(r) is None]
    print(
        f"top-level statements outside the three calls (the server's own, jobs parked):"
        f" {sum(r['calls'] for r in other)} calls,"
        f" {sum(r['total_exec_time'] for r in other):.1f} ms in all"
    )
    for r in sorted(other, key=lambda r: -r["calls"])[:5]:
        print(f"  {r['calls']:6d} {' '.join(r['query'].split())[:100]}")
    nested = sorted((r for r in rows if not r["toplevel"]), key=lambda r: -r["total_exec_time"])
    print()
    print(
        f"nested statements per cycle: {sum(r['calls'] for r in nested) / n:.2f}"
        " (calls/cycle, exec ms/call, hit/call, dirtied/call, WAL bytes/call; by total time)"
    )
    for r in nested[: args.top]:
        c = r["calls"]
        text = re.sub(r"\s+", " ", r["query"])[:90]
        print(
            f"  {c / n:5.2f} {r['total_exec_time'] / c:7.3f} {r['shared_blks_hit'] / c:7.1f}"
            f" {r['shared_blks_dirtied'] / c:6.2f} {float(r['wal_bytes']) / c:8.0f}  {text}"
        )
    print()
    print("tuples per cycle (pg_stat_user_tables): inserted, updated, of which HOT")
    for rel in sorted(t1):
        a = t0.get(rel, (0, 0, 0))
        b = t1[rel]
        ins, upd, hot = (b[i] - a[i] for i in range(3))
        if ins or upd:
            print(f"  {rel:<24} {ins / n:6.2f} {upd / n:6.2f} {hot / n:6.2f}")


def _line(label: str, s: dict[str, float], n: int) -> str:
    return (
        f"| {label} | {s['calls'] / n:.2f} | {s['total_exec_time'] / n:.3f} |"
        f" {s['shared_blks_hit'] / n:.1f} | {s['shared_blks_read'] / n:.2f} |"
        f" {s['shared_blks_dirtied'] / n:.2f} | {s['wal_records'] / n:.1f} |"
        f" {s['wal_bytes'] / n:.0f} |"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cycles", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=400)
    p.add_argument("--clients", type=int, default=16, help="experts cycling at once")
    p.add_argument("--tasks", type=int, default=30_000)
    p.add_argument("--skills", type=int, default=50)
    p.add_argument("--projects", type=int, default=10)
    p.add_argument("--top", type=int, default=30, help="nested statements listed")
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--stale", action="store_true", help="no VACUUM ANALYZE after the warm-up")
    p.add_argument("--keep", action="store_true", help="keep the database (to EXPLAIN in it)")
    asyncio.run(measure(p.parse_args()))


if __name__ == "__main__":
    main()
