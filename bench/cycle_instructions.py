"""Instructions Postgres spends per claim+submit cycle, counted by callgrind.

Run by hand (never part of the test suite's pass/fail); prints figures:

    PYTHONPATH=. .venv/bin/python bench/cycle_instructions.py               # ~5 minutes
    PYTHONPATH=. .venv/bin/python bench/cycle_instructions.py --cycles 200  # finer, slower

Why instructions: on a shared 2-core VM the same cycle's throughput and CPU time swing by
20% from one run to the next, more than most changes to the SQL are worth. An instruction count
repeats to within about 1% whatever else the machine does, so two checkouts compare across runs:
run this script from each (`PYTHONPATH=<other checkout>` keeps this file, swaps the service).

What it does:
1. A throwaway cluster (initdb, no pg_stat_statements: nothing but Postgres is counted) holding
   bench/claim.py's world: 50k open tasks over 200 Zipf skills, 3,000 experts x 3 skills, and
   --history cycles of history, then VACUUM ANALYZE. The cluster is stopped and its data folder
   copied twice.
2. On each copy a single-user backend (`postgres --single`) runs under `valgrind --tool=callgrind`
   and CALLs bench_cycles (bench/bench.sql): --warm cycles, then on the second copy --cycles
   more. A cycle is the service's own taskroute_claim then taskroute_submit (with --heartbeats,
   that many taskroute_heartbeat calls between them), each committed on its own, by experts
   in a fixed order. The difference of the two counts divided by --cycles is one cycle with
   plans cached and catalogs warm; start-up and warm-up cancel out.
3. Where a cycle's instructions go (callgrind_annotate, inclusive, the same difference): the
   functions that name Postgres' per-statement costs (executor start-up and end, triggers,
   index entries, CHECK constraints parsed per statement, plan cache checks, commit, WAL).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import claim  # noqa: E402  (bench/, next to this script: its world and seeding)
import sql_profile  # noqa: E402

# Postgres' own functions whose inclusive cost names a per-statement overhead.
WHERE_IT_GOES = (
    ("plpgsql_exec_function", "PL/pgSQL functions (everything below)"),
    ("standard_ExecutorStart", "executor start-up (plans built into state per statement)"),
    ("standard_ExecutorRun", "executor run"),
    ("standard_ExecutorFinish", "executor finish (AFTER triggers, FK checks)"),
    ("standard_ExecutorEnd", "executor end"),
    ("plpgsql_exec_trigger", "PL/pgSQL triggers"),
    ("RI_FKey_check_ins", "foreign key checks on insert"),
    ("RI_FKey_check_upd", "foreign key checks on update"),
    ("ExecInsertIndexTuples", "index entries"),
    ("ExecConstraints", "CHECK and NOT NULL constraints"),
    ("stringToNode", "  of which node trees read from text"),
    ("GetCachedPlan", "plan cache checks and re-plans"),
    ("pg_plan_query", "planning"),
    ("heap_insert", "heap inserts"),
    ("heap_update", "heap updates"),
    ("heap_lock_tuple", "row locks"),
    ("XLogInsert", "WAL records"),
    ("CommitTransactionCommand", "commit"),
)


def callgrind_run(cluster: sql_profile.PrivateCluster, data: Path, db: str, calls: str) -> Path:
    """One single-user backend on `data` under callgrind, fed `calls`; its output file."""
    out = data.parent / f"callgrind.{data.name}"
    cmd = cluster.as_user + [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        str(cluster.bin / "postgres"), "--single", "-j", "-D", str(data),
        "-c", "autovacuum=off", db,
    ]  # fmt: skip
    done = subprocess.run(cmd, input=calls, text=True, capture_output=True, cwd=data.parent)
    if done.returncode != 0 or "ERROR" in done.stdout + done.stderr:
        raise RuntimeError(f"single-user run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return out


def inclusive(out: Path) -> tuple[int, dict[str, int]]:
    """Total instructions and each function's inclusive count (callgrind_annotate)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    totals = re.search(r"^([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text, re.M)
    if totals is None:
        raise RuntimeError(f"no totals in callgrind_annotate's output for {out}")
    total = int(totals.group(1).replace(",", ""))
    by_fn: dict[str, int] = {}
    # recursion levels ('2, '3) are left out: the outermost call's count includes them
    for m in re.finditer(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:(\w+) \[", text, re.M):
        name = m.group(2)
        by_fn[name] = max(by_fn.get(name, 0), int(m.group(1).replace(",", "")))
    return total, by_fn


async def build_world(cluster: sql_profile.PrivateCluster, args: argparse.Namespace) -> str:
    name, dsn = await claim.temp_db(cluster.dsn, "instructions")
    rng = random.Random(8)
    world = await claim.seed(dsn, args.tasks + args.history, args.skills, args.experts, rng)
    await claim.history(dsn, world, args.history)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(claim.B["bench_cycle_procedure"])
        await conn.execute("VACUUM ANALYZE")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    return name


def main(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise SystemExit("valgrind (with callgrind_annotate) is needed")
    cluster = sql_profile.PrivateCluster(settings={"max_wal_size": "8GB"})
    cluster.start()
    try:
        db = asyncio.run(build_world(cluster, args))
        cluster.stop()
        copies = []
        for tag in ("base", "more"):
            copy = cluster.dir / tag
            subprocess.run(["cp", "-a", str(cluster.data), str(copy)], check=True)
            copies.append(copy)
        hb = args.heartbeats
        warm = f"CALL bench_cycles(0, {args.warm}, {hb});\n\n"
        more = f"CALL bench_cycles({args.warm}, {args.cycles}, {hb});\n\n"
        base_total, base_fn = inclusive(callgrind_run(cluster, copies[0], db, warm))
        more_out = callgrind_run(cluster, copies[1], db, warm + more)
        more_total, more_fn = inclusive(more_out)
        if args.keep:
            # for callgrind_annotate --tree=caller or kcachegrind: who calls what
            args.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(copies[0].parent / f"callgrind.{copies[0].name}", args.keep)
            shutil.copy(more_out, args.keep)
    finally:
        cluster.destroy()
    per_cycle = (more_total - base_total) / args.cycles
    print(f"# bench/cycle_instructions.py: {args.cycles} cycles after {args.warm} warm-up ones")
    calls = (
        f"claim + {args.heartbeats} heartbeat(s) + submit" if args.heartbeats else "claim + submit"
    )
    print(f"instructions per cycle ({calls}, each committed): {per_cycle / 1e6:.3f} M")
    print("where they go (inclusive; a line's share includes the lines indented under it):")
    for fn, what in WHERE_IT_GOES:
        n = (more_fn.get(fn, 0) - base_fn.get(fn, 0)) / args.cycles
        print(f"  {n / 1e6:7.3f} M  {100 * n / per_cycle:5.1f}%  {fn:<24} {what}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cycles", type=int, default=100, help="cycles counted (default 100)")
    p.add_argument("--warm", type=int, default=30, help="warm-up cycles before them")
    p.add_argument("--tasks", type=int, default=50_000)
    p.add_argument("--skills", type=int, default=200)
    p.add_argument("--experts", type=int, default=3_000)
    p.add_argument("--history", type=int, default=5_000)
    p.add_argument("--keep", type=Path, help="copy both callgrind outputs to this folder")
    p.add_argument(
        "--heartbeats", type=int, default=0, help="heartbeats between each claim and submit"
    )
    return p.parse_args()


if __name__ == "__main__":
    main(parse_args())
