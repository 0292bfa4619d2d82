"""Postgres' work per claim+submit cycle, per statement and per trigger (bench/claim.py
--profile-sql).

Not run on its own. `PrivateCluster` is a throwaway Postgres (initdb/pg_ctl from
/usr/lib/postgresql/*/bin) with pg_stat_statements preloaded, `pg_stat_statements.track = all`
(statements nested in functions and triggers are counted) and `track_functions = all`
(trigger functions' calls and times); the bench uses it when the --pg cluster does not preload
pg_stat_statements. `snapshot` reads the cumulative counters of one database (statements,
functions, tables) and the cluster's WAL; `report` prints the difference of two snapshots
divided by the cycles done between them.
"""

from __future__ import annotations

import asyncio
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import asyncpg

STMT_COLS = (
    "calls",
    "total_exec_time",
    "rows",
    "shared_blks_hit",
    "shared_blks_read",
    "shared_blks_dirtied",
    "shared_blks_written",
    "wal_records",
    "wal_fpi",
    "wal_bytes",
)
# Settings of the throwaway cluster: the statistics, and no checkpoint inside a measurement
# (a checkpoint makes the next change of every page write a full-page image: WAL bytes jump).
SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "10000",
    "track_functions": "all",
    "max_connections": "300",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "1h",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    """A throwaway Postgres cluster on a free loopback port (as the `postgres` OS user when
    run as root: initdb refuses root), removed by `destroy`."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = SETTINGS if settings is None else settings
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            raise SystemExit("--profile-sql: no Postgres binaries under /usr/lib/postgresql")
        self.bin = Path(found[-1]).parent
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="taskroute_bench_pg_"))
        self.data = self.dir / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres", "postgres")

    def _run(self, cmd: list[str], timeout: float = 120) -> None:
        subprocess.run(
            self.as_user + cmd, check=True, timeout=timeout, capture_output=True, cwd=self.dir
        )

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                   "--auth=trust", "-E", "UTF8"])  # fmt: skip
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.dir} "
        opts += " ".join(f"-c {k}={v}" for k, v in self.settings.items())
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts,
                   "-l", str(self.dir / "log"), "-w", "-t", "60", "start"])  # fmt: skip

    def stop(self) -> None:
        """Stops the server and keeps the data folder (destroy removes both)."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "stop"])

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                           "-w", "stop"])  # fmt: skip
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


async def has_statements(dsn: str) -> bool:
    """Whether the cluster at `dsn` preloads pg_stat_statements."""
    conn = await asyncpg.connect(dsn)
    try:
        libs = await conn.fetchval("SHOW shared_preload_libraries")
        return "pg_stat_statements" in libs
    finally:
        await conn.close()


@dataclass
class Snapshot:
    statements: dict[tuple[bool, str], dict[str, float]]
    functions: dict[str, tuple[int, float, float]]
    tables: dict[str, tuple[int, int, int, int]]
    wal: tuple[int, int, int]  # bytes, records, full-page images
    cycles: int


async def snapshot(dsn: str, cycles_sql: str) -> Snapshot:
    """The cumulative counters of the database at `dsn` (pg_stat_statements rows of this
    database, by top-level flag and text), its functions and tables, and the cluster's WAL."""
    await asyncio.sleep(1.2)  # backends flush table and function counters within a second
    # The snapshot's own statements are not counted (a superuser may set the tracking).
    conn = await asyncpg.connect(dsn, server_settings={"pg_stat_statements.track": "none"})
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = await conn.fetch(
            "SELECT toplevel, query, " + ", ".join(f"sum({c})::float8 AS {c}" for c in STMT_COLS)
            + " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
            " WHERE datname = current_database()) GROUP BY toplevel, query"
        )  # fmt: skip
        statements = {(r["toplevel"], r["query"]): {c: r[c] for c in STMT_COLS} for r in rows}
        functions = {
            r["funcname"]: (r["calls"], r["self_time"], r["total_time"])
            for r in await conn.fetch(
                "SELECT funcname, calls, self_time, total_time FROM pg_stat_user_functions"
            )
        }
        tables = {
            r["relname"]: (r["n_tup_ins"], r["n_tup_upd"], r["n_tup_hot_upd"], r["n_tup_del"])
            for r in await conn.fetch(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
                " FROM pg_stat_user_tables"
            )
        }
        w = await conn.fetchrow("SELECT wal_bytes, wal_records, wal_fpi FROM pg_stat_wal")
        wal = (int(w["wal_bytes"]), int(w["wal_records"]), int(w["wal_fpi"]))
        cycles = int(await conn.fetchval(cycles_sql))
    finally:
        await conn.close()
    return Snapshot(statements, functions, tables, wal, cycles)


def _short(text: str, width: int) -> str:
    return re.sub(r"\s+", " ", text).strip()[:width]


def report(label: str, n: int, a: Snapshot, b: Snapshot, top: int) -> dict[str, float]:
    """Prints the per-cycle profile between two snapshots; returns the cycle's totals."""
    cycles = b.cycles - a.cycles
    print(f"\n## SQL profile: {label} N={n}, {cycles} cycles (claim + submit), per cycle")
    if cycles <= 0:
        print("  no cycles done")
        return {}
    diff: list[tuple[bool, str, dict[str, float]]] = []
    for key, now in b.statements.items():
        was = a.statements.get(key, dict.fromkeys(STMT_COLS, 0.0))
        d = {c: now[c] - was[c] for c in STMT_COLS}
        if d["calls"] > 0:
            diff.append((key[0], key[1], d))
    wal = [b.wal[i] - a.wal[i] for i in range(3)]
    top_rows = [d for toplevel, _, d in diff if toplevel]
    total = {c: sum(d[c] for d in top_rows) / cycles for c in STMT_COLS}
    total["cluster_wal_bytes"] = wal[0] / cycles
    print(
        f"WAL (pg_stat_wal, the whole cluster): {wal[0] / cycles:.0f} bytes, "
        f"{wal[1] / cycles:.1f} records, {wal[2] / cycles:.2f} full-page images per cycle"
    )
    print(
        f"top-level statements: {total['calls']:.2f} calls, {total['total_exec_time']:.3f} ms,"
        f" shared hit {total['shared_blks_hit']:.1f} read {total['shared_blks_read']:.2f}"
        f" dirtied {total['shared_blks_dirtied']:.2f} written {total['shared_blks_written']:.2f},"
        f" WAL {total['wal_records']:.1f} records {total['wal_bytes']:.0f} bytes"
    )
    head = (
        "calls/cyc   ms/call   hit/call  read  dirtied  written  WALrec  WALbytes/call  statement"
    )
    for toplevel in (True, False):
        rows = sorted(
            ((q, d) for t, q, d in diff if t == toplevel), key=lambda r: -r[1]["total_exec_time"]
        )
        if not rows:
            continue
        what = "top-level" if toplevel else "nested (inside functions and triggers)"
        nested_calls = sum(d["calls"] for _, d in rows) / cycles
        print(f"{what}: {nested_calls:.2f} statements per cycle, by total time")
        print("  " + head)
        for q, d in rows[:top]:
            c = d["calls"]
            print(
                f"  {c / cycles:8.2f} {d['total_exec_time'] / c:9.3f}"
                f" {d['shared_blks_hit'] / c:9.1f}"
                f" {d['shared_blks_read'] / c:5.2f} {d['shared_blks_dirtied'] / c:8.2f}"
                f" {d['shared_blks_written'] / c:8.2f} {d['wal_records'] / c:7.2f}"
                f" {d['wal_bytes'] / c:14.0f}  {_short(q, 110)}"
            )
    funcs = []
    for name, (calls, self_t, total_t) in b.functions.items():
        c0, s0, t0 = a.functions.get(name, (0, 0.0, 0.0))
        if calls > c0:
            funcs.append((name, calls - c0, self_t - s0, total_t - t0))
    if funcs:
        print("functions and triggers (pg_stat_user_functions): calls/cycle, ms/call self, total")
        for name, calls, self_t, total_t in sorted(funcs, key=lambda f: -f[3]):
            print(
                f"  {name:<36} {calls / cycles:6.2f} {self_t / calls:8.3f} {total_t / calls:8.3f}"
            )
    print("tuples per cycle (pg_stat_user_tables): inserted, updated, of which HOT, deleted")
    for rel in sorted(b.tables):
        seen = a.tables.get(rel, (0, 0, 0, 0))
        ins, upd, hot, dele = (b.tables[rel][i] - seen[i] for i in range(4))
        if ins or upd or dele:
            print(
                f"  {rel:<26} {ins / cycles:6.2f} {upd / cycles:6.2f} {hot / cycles:6.2f}"
                f" {dele / cycles:6.2f}"
            )
    return total


def print_comparison(totals: dict[str, dict[str, float]]) -> None:
    """One line per phase: the cycle's totals and their ratio to the seed's (pgbench)."""
    if not totals:
        return
    base = totals.get("pgbench")
    print("\n# SQL work per cycle (top-level statements, nested included; x = / pgbench)")
    keys = [
        ("total_exec_time", "exec ms", 3),
        ("shared_blks_hit", "hit", 1),
        ("shared_blks_dirtied", "dirtied", 2),
        ("wal_records", "WAL rec", 1),
        ("cluster_wal_bytes", "WAL bytes", 0),
    ]
    for label, t in totals.items():
        cells = []
        for key, name, digits in keys:
            x = f" (x{t[key] / base[key]:.1f})" if base and base.get(key) else ""
            cells.append(f"{name} {t[key]:.{digits}f}{x}")
        print(f"{label:<9} " + "  ".join(cells))
