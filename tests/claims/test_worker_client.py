"""The worker client (taskroute.client) against a real `taskroute serve` subprocess: waits on
taskAvailable when idle, heartbeats through a server restart, submits once, surfaces a lost
lease and a refused answer; and the README's example runs."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from taskroute.client import AnswerRefused, LeaseLost, Task, Worker

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, wait_for
from ..procs import ROOT, ServeProcess


@pytest_asyncio.fixture
async def served(database_url: str, tmp_path: Path) -> AsyncIterator[ServeProcess]:
    server = ServeProcess(
        database_url,
        tmp_path / "server.log",
        TASKROUTE_BLOB_URL=f"file://{tmp_path / 'blobs'}",
        TASKROUTE_DATA_DIR=str(tmp_path / "data"),
        TASKROUTE_SWEEP_INTERVAL="0.5",
    )
    await server.astart()
    yield server
    await asyncio.to_thread(server.stop)


async def task_waiters(api: Api, n: int) -> bool:
    r = await api.rest("GET", "/v1/realtime/status", ADMIN_TOKEN)
    return bool(r.json()["task_waiters"] == n)


async def _people(api: Api) -> tuple[str, str]:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    return customer["token"], expert["token"]


async def test_idle_worker_is_woken_by_the_subscription_and_submits(
    served: ServeProcess,
) -> None:
    async with Api(served.url) as api:
        customer, expert = await _people(api)
        # A re-check period far beyond the test: only the subscription can wake it in time.
        async with Worker(served.url, expert, recheck_every=600) as worker:
            got: list[Task] = []

            async def consume() -> None:
                async for task in worker.tasks(skills=["grading"]):
                    got.append(task)
                    with pytest.raises(AnswerRefused) as refused:
                        await task.submit({"grade": "five"})
                    assert refused.value.path == "$.grade"
                    task.check()  # still held after the refusal
                    task.receipt = await task.submit({"grade": 5})

            consumer = asyncio.create_task(consume())
            try:
                # it found nothing and waits on the subscription
                await wait_for(lambda: task_waiters(api, 1), "the worker's subscription")
                assert not got and not consumer.done()
                schema = {
                    "type": "object",
                    "properties": {"grade": {"type": "integer"}},
                    "required": ["grade"],
                }
                await api.create_project(
                    customer, [{"skill": "grading", "payload": {"text": "hi"}}],
                    answerSchema=schema, payCents=3,
                )  # fmt: skip
                await wait_for(lambda: bool(got) and got[0].receipt is not None, timeout=20)
            finally:
                consumer.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await consumer
        task = got[0]
        assert task.payload == {"text": "hi"} and task.answer_schema == schema
        assert task.receipt is not None and task.receipt["pay_cents"] == 3


async def test_heartbeats_and_submit_survive_a_server_restart(served: ServeProcess) -> None:
    async with Api(served.url) as api:
        customer, expert = await _people(api)
        # A lease far longer than any restart, however slow the machine: the test is about
        # the client carrying on, not about the lease running out.
        await api.create_project(
            customer, [{"skill": "grading", "payload": {"text": "x"}}],
            leaseSeconds=3600, heartbeatTimeoutSeconds=3600, payCents=4,
        )  # fmt: skip
    async with Worker(served.url, expert, heartbeat_every=0.2, retry_for=300) as worker:
        task = await worker.claim(["grading"])
        assert task is not None
        await asyncio.to_thread(served.stop)
        down_until = task.lease_until
        await served.astart()
        # A heartbeat after the restart moved the lease on (the client kept it alive).
        await wait_for(lambda: task.lease_until > down_until, timeout=30)
        receipt = await task.submit({"grade": 3})
        again = await task.submit({"grade": 3})
        # the same receipt; only the repeat says it is one
        flags = ("duplicate", "answer_differs")
        assert {k: v for k, v in receipt.items() if k not in flags} == {
            k: v for k, v in again.items() if k not in flags
        }
        assert receipt["pay_cents"] == 4 and again["duplicate"] and not receipt["duplicate"]
    async with Api(served.url) as api:  # the server holds that one receipt
        r = await api.rest("POST", f"/v1/assignments/{receipt['assignment_id']}/submit", expert,
                           json={"answer": {"grade": 3}})  # fmt: skip
        assert r.json()["id"] == receipt["id"]


async def test_a_lost_lease_surfaces_on_the_task(served: ServeProcess, clock: DbClock) -> None:
    async with Api(served.url) as api:
        customer, expert = await _people(api)
        await api.create_project(
            customer, [{"skill": "grading", "payload": 1}],
            leaseSeconds=60, heartbeatTimeoutSeconds=60,
        )  # fmt: skip
    async with Worker(served.url, expert, heartbeat_every=0.2) as worker:
        task = await worker.claim()
        assert task is not None
        # The database's clock passes the lease's end: the next heartbeat finds it gone.
        await clock.advance(3600)
        await wait_for(lambda: task.lost is not None, "the lost lease", timeout=60)
        assert task.lost.code == "LEASE_EXPIRED"
        with pytest.raises(LeaseLost):
            await task.submit(1)


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A worker client in Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


async def test_the_readme_example_runs(served: ServeProcess, tmp_path: Path) -> None:
    code = _readme_example()
    assert len(code.strip().splitlines()) <= 16
    async with Api(served.url) as api:
        customer, expert = await _people(api)
        await api.create_project(
            customer, [{"skill": "grading", "payload": {"text": "one two three"}}], payCents=9
        )
    script = tmp_path / "worker.py"
    script.write_text(code)
    env: dict[str, Any] = {
        **os.environ, "PYTHONPATH": str(ROOT), "TASKROUTE_URL": served.url,
        "EXPERT_TOKEN": expert,
    }  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
        assert re.match(rb"task [0-9a-f-]+: paid 9 cents", line), line
    finally:
        proc.terminate()
        await proc.wait()


HOLDING_SCRIPT = """
import asyncio
import faulthandler
import os
import signal

from taskroute.client import Worker, run

# As a shell starts a program: Ctrl-C neither blocked nor ignored (a test runner's worker may
# pass either on to its children). SIGUSR1 dumps the stacks, for a test that waited in vain.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
signal.signal(signal.SIGINT, signal.default_int_handler)
faulthandler.register(signal.SIGUSR1)


async def main() -> None:
    async with Worker(os.environ["TASKROUTE_URL"], os.environ["EXPERT_TOKEN"]) as worker:
        async for task in worker.tasks():
            print(f"holding {task.id}", flush=True)
            await asyncio.Event().wait()  # a slow expert: still on it at Ctrl-C


run(main())
"""

CURRENT_CLAIM = "{ me { expert { currentClaim { assignmentId } } } }"


async def test_ctrl_c_releases_the_held_task_and_exits_130_without_a_traceback(
    served: ServeProcess, tmp_path: Path
) -> None:
    async with Api(served.url) as api:
        customer, expert = await _people(api)
        created = await api.create_project(customer, [{"skill": "grading", "payload": 1}])
        pid = created["project"]["id"]
        script = tmp_path / "holder.py"
        script.write_text(HOLDING_SCRIPT)
        env: dict[str, Any] = {
            **os.environ, "PYTHONPATH": str(ROOT), "TASKROUTE_URL": served.url,
            "EXPERT_TOKEN": expert,
        }  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            # The script's own word that it holds the task: the server's record of the claim
            # comes earlier, while the claim's answer may still be on its way to the script,
            # and a Ctrl-C then finds nothing to release.
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
            assert line.startswith(b"holding "), line
            proc.send_signal(signal.SIGINT)
            try:
                _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
            except TimeoutError:
                proc.send_signal(signal.SIGUSR1)
                assert proc.stderr is not None
                dump = await asyncio.wait_for(proc.stderr.read(20000), timeout=5)
                stacks = dump.decode()
                raise AssertionError(f"no exit 60 s after Ctrl-C; its stacks:\n{stacks}") from None
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 130, stderr
        assert b"Traceback" not in stderr, stderr.decode()
        assert stderr.strip() == b"stopped (Ctrl-C)"
        # released, not left to time out: open for others now, and no claim held
        progress = await api.progress(customer, pid)
        assert progress["open"] == 1 and progress["claimed"] == 0, progress
        assert (await api.gql(CURRENT_CLAIM, token=expert))["me"]["expert"]["currentClaim"] is None
        other = await api.create_expert(["grading"], "other")
        assert await api.claim(other["token"]) is not None
