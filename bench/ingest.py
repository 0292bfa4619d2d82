"""Ingest throughput: 100k tasks with 2 KB payloads through a real server, on both stores.

    PYTHONPATH=. .venv/bin/python bench/ingest.py [--tasks 100000] [--stores folder,s3]

Per store it starts a fresh database, a `taskroute serve` process (and for S3 a moto server
process), posts the batch as requests of --per-request tasks through REST (each answered 202
at once), waits until every task is open, and prints the accept latency and tasks/second
(from the first request to the last task open). Needs Postgres at 127.0.0.1:5432 (trust auth)
or TASKROUTE_TEST_PG.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import string
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import boto3
import httpx

ROOT = Path(__file__).resolve().parent.parent
ADMIN = "bench-admin"
PG = os.environ.get("TASKROUTE_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def payloads(n: int, size: int = 2048) -> list[dict]:
    rnd = random.Random(7)
    alphabet = string.ascii_letters + " "
    base = "".join(rnd.choice(alphabet) for _ in range(size))
    # unique per task (content addressing would otherwise store one object)
    return [{"n": i, "text": base[: size - 40]} for i in range(n)]


async def run(kind: str, n_tasks: int, per_request: int, tmp: Path) -> None:
    dbname = f"taskroute_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f'CREATE DATABASE "{dbname}"')
    dsn = PG.rsplit("/", 1)[0] + "/" + dbname
    procs: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": dsn,
        "TASKROUTE_ADMIN_TOKEN": ADMIN,
        "TASKROUTE_DATA_DIR": str(tmp / kind),
        "TASKROUTE_MAX_BODY_BYTES": str(64 * 1024 * 1024),
    }
    try:
        if kind == "s3":
            mport = free_port()
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(mport)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            endpoint = f"http://127.0.0.1:{mport}"
            wait_http(endpoint + "/moto-api/")
            env.update(
                AWS_ENDPOINT_URL=endpoint,
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench",
                AWS_DEFAULT_REGION="us-east-1",
                TASKROUTE_BLOB_URL="s3://bench/payloads",
            )
            boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            ).create_bucket(Bucket="bench")
        else:
            env["TASKROUTE_BLOB_URL"] = (tmp / kind / "blobs").as_uri()
        port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "taskroute",
                    "serve",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                ],
                env=env,
                cwd=tmp,
            )
        )
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/healthz")
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            r = await http.post(
                "/graphql",
                headers={"Authorization": f"Bearer {ADMIN}"},
                json={"query": 'mutation { createCustomer(name: "b") { token } }'},
            )
            token = r.json()["data"]["createCustomer"]["token"]
            auth = {"Authorization": f"Bearer {token}"}
            tasks = [{"skill": "grading", "payload": p} for p in payloads(n_tasks)]
            accept: list[float] = []
            t0 = time.perf_counter()
            t = time.perf_counter()
            r = await http.post(
                "/v1/projects", headers=auth, json={"name": "bench", "tasks": tasks[:per_request]}
            )
            accept.append(time.perf_counter() - t)
            assert r.status_code == 202, r.text
            pid = r.json()["project_id"]
            for i in range(per_request, n_tasks, per_request):
                t = time.perf_counter()
                r = await http.post(
                    f"/v1/projects/{pid}/tasks",
                    headers=auth,
                    json={"tasks": tasks[i : i + per_request]},
                )
                accept.append(time.perf_counter() - t)
                assert r.status_code == 202, r.text
            accepted = time.perf_counter() - t0
            while True:
                ing = (await http.get(f"/v1/projects/{pid}", headers=auth)).json()["ingest"]
                if ing["state"] in ("done", "failed"):
                    break
                await asyncio.sleep(0.2)
            total = time.perf_counter() - t0
        db = await asyncpg.connect(dsn)
        open_tasks = await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'open'")
        await db.close()
        print(
            f"{kind:6} {n_tasks} tasks x {len(tasks[0]['payload']['text']) + 20} B, "
            f"{per_request}/request: accept {min(accept) * 1000:.0f}-{max(accept) * 1000:.0f} ms "
            f"per request ({accepted:.1f} s for all), all open after {total:.1f} s "
            f"=> {n_tasks / total:,.0f} tasks/s (state {ing['state']}, open {open_tasks})"
        )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:  # moto ignores SIGTERM while busy
                p.kill()
                p.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--per-request", type=int, default=10_000)
    ap.add_argument("--stores", default="folder,s3")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            asyncio.run(run(kind, args.tasks, args.per_request, Path(tmp)))


if __name__ == "__main__":
    main()
