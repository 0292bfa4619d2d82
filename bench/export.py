"""Export throughput and memory: a project of --items resolved items through a real server.

    PYTHONPATH=. .venv/bin/python bench/export.py                  # 1M items
    PYTHONPATH=. .venv/bin/python bench/export.py --items 100000   # a quick check

In a fresh database: one customer and project through the API, then --items items with small
inline payloads and one 'resolved' change each (two experts' answers in its snapshot) written
straight into the tables with SQL (seeding through the claim loop would take hours). Starts
`taskroute serve`, downloads GET /v1/projects/{id}/export as JSONL and as CSV, and prints rows
per second and the server process's peak RSS while it streamed (psutil, sampled every 20 ms).
Then the naive baseline in a separate process: the same export query without pages (the
whole project in one fetch) and the file built in memory, with that process's peak RSS.

Needs Postgres at 127.0.0.1:5432 (trust auth) or TASKROUTE_TEST_PG.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taskroute.db.migrate import migrate_url  # noqa: E402
from tests.procs import ADMIN_TOKEN, ServeProcess  # noqa: E402

PG = os.environ.get("TASKROUTE_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/postgres"

SEED = """
WITH ins AS (
    INSERT INTO items (project_id, skill, external_id, payload, payload_bytes)
    SELECT $1, 'labeling', 'ext-' || g, jsonb_build_object('text', 'item number ' || g), 30
    FROM generate_series(1, $2::int) g
    RETURNING id
)
INSERT INTO result_changes (project_id, item_id, version, change, answer, agreement, method,
                            answers)
SELECT $1, id, 1, 'resolved', '{"label": "a"}', 1, 'majority',
       jsonb_build_array(
           jsonb_build_object('expert_id', $3::text, 'answer', '{"label": "a"}'::jsonb,
                              'kind', 'normal', 'retracted', false),
           jsonb_build_object('expert_id', $4::text, 'answer', '{"label": "a"}'::jsonb,
                              'kind', 'normal', 'retracted', false))
FROM ins
"""

NAIVE = """
import asyncio, json, sys, resource, time
import asyncpg
sys.path.insert(0, {root!r})
from taskroute.db.queries import Q

async def main():
    conn = await asyncpg.connect({url!r})
    await conn.set_type_codec('jsonb', encoder=json.dumps, decoder=json.loads, schema='pg_catalog')
    t = time.perf_counter()
    rows = await conn.fetch(Q['export_page'], {pid!r}, 2**62, 2**62, None, 2**31 - 1)
    text = ''.join(json.dumps({{k: (str(v) if k in ('item_id', 'at', 'payload_deleted_at') else v)
                               for k, v in r.items()}}) + '\\n' for r in rows)
    dt = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(len(rows), dt, rss, len(text))

asyncio.run(main())
"""


def sample_peak(pid: int, stop: threading.Event, out: list[int]) -> None:
    proc = psutil.Process(pid)
    peak = 0
    while not stop.is_set():
        try:
            peak = max(peak, proc.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    out.append(peak)


def download(srv: ServeProcess, token: str, project: str, fmt: str) -> tuple[int, float, int]:
    """(rows, seconds, server peak RSS bytes) of one streamed export."""
    assert srv.proc is not None
    stop, peak = threading.Event(), []
    sampler = threading.Thread(target=sample_peak, args=(srv.proc.pid, stop, peak))
    sampler.start()
    t = time.perf_counter()
    lines = 0
    with httpx.stream(
        "GET", f"{srv.url}/v1/projects/{project}/export", params={"format": fmt},
        headers={"Authorization": f"Bearer {token}"}, timeout=None,
    ) as r:  # fmt: skip
        r.raise_for_status()
        for chunk in r.iter_bytes():
            lines += chunk.count(b"\n")
    dt = time.perf_counter() - t
    stop.set()
    sampler.join()
    rows = lines - (1 if fmt == "csv" else 0)  # the CSV header line
    return rows, dt, peak[0]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--no-naive", action="store_true", help="skip the materialising baseline")
    args = ap.parse_args()

    name = f"taskroute_bench_export_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = PG.rsplit("/", 1)[0] + f"/{name}"
    srv: ServeProcess | None = None
    try:
        await migrate_url(url)
        with tempfile.TemporaryDirectory() as tmp:
            srv = ServeProcess(url, Path(tmp) / "serve.log")
            await srv.astart()
            async with httpx.AsyncClient(base_url=srv.url, timeout=60) as http:
                gql = 'mutation { createCustomer(name: "bench") { token } }'
                r = await http.post("/graphql", json={"query": gql},
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
                token = r.json()["data"]["createCustomer"]["token"]
                r = await http.post("/v1/projects", json={"name": "export", "tasks": []},
                                    headers={"Authorization": f"Bearer {token}"})  # fmt: skip
                project = r.json()["project_id"]
            conn = await asyncpg.connect(url)
            t = time.perf_counter()
            await conn.execute(SEED, uuid.UUID(project), args.items,
                               str(uuid.uuid4()), str(uuid.uuid4()))  # fmt: skip
            await conn.execute("ANALYZE items; ANALYZE result_changes")
            await conn.close()
            print(f"seeded {args.items} results in {time.perf_counter() - t:.1f} s")
            assert srv.proc is not None
            idle = psutil.Process(srv.proc.pid).memory_info().rss
            print(f"server RSS before exports: {idle / 2**20:.0f} MiB")
            for fmt in ("jsonl", "csv"):
                rows, dt, peak = download(srv, token, project, fmt)
                assert rows == args.items, (fmt, rows)
                print(f"export {fmt:5}: {rows} rows in {dt:.1f} s = {rows / dt:,.0f} rows/s,"
                      f" server peak RSS {peak / 2**20:.0f} MiB")  # fmt: skip
            srv.stop()
            srv = None
            if not args.no_naive:
                code = NAIVE.format(root=str(ROOT), url=url, pid=project)
                out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                     text=True, check=True).stdout.split()  # fmt: skip
                rows, dt, rss = int(out[0]), float(out[1]), float(out[2])
                print(f"naive  jsonl: {rows} rows in {dt:.1f} s = {rows / dt:,.0f} rows/s"
                      f" (no HTTP), process peak RSS {rss:.0f} MiB")  # fmt: skip
    finally:
        if srv is not None:
            srv.stop()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
