"""The customer side of taskroute.client against a real `taskroute serve` subprocess: a large
batch waited out, progress over SSE until completed, the change feed resumed from its cursor,
an export streamed to a file; and the README's example runs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from taskroute.client import ClientError, CustomerClient

from ..helpers import Api, tasks_of
from ..procs import ROOT, ServeProcess


@pytest_asyncio.fixture
async def served(database_url: str, tmp_path: Path) -> AsyncIterator[ServeProcess]:
    server = ServeProcess(
        database_url,
        tmp_path / "server.log",
        TASKROUTE_BLOB_URL=f"file://{tmp_path / 'blobs'}",
        TASKROUTE_DATA_DIR=str(tmp_path / "data"),
    )
    await server.astart()
    yield server
    await asyncio.to_thread(server.stop)


async def answer(api: Api, token: str, n: int, answer: Any) -> None:
    for _ in range(n):
        claim = await api.claim(token)
        assert claim is not None
        await api.submit(token, claim["assignmentId"], answer)


async def test_large_batch_is_waited_out_and_progress_streams_until_completed(
    served: ServeProcess,
) -> None:
    async with Api(served.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        async with CustomerClient(served.url, customer["token"]) as client:
            # 150 tasks: accepted (202) and ingested in the background
            project = await client.create_project("big", tasks_of("grading", 150), wait_timeout=60)
            pid = project["project_id"]
            assert project["status"] == "active" and project["ingest"]["state"] == "done"
            assert project["progress"]["total"] == 150 and project["progress"]["open"] == 150

            small = await client.create_project("small", tasks_of("grading", 2), pay_cents=3)
            seen: list[dict[str, Any]] = []

            async def watch() -> None:
                async for progress in client.progress(small["project_id"]):
                    seen.append(progress)

            watcher = asyncio.create_task(watch())
            # the first snapshot comes at once; then each answer moves it
            while not seen:
                await asyncio.sleep(0.05)
            assert (seen[0]["done"], seen[0]["total"], seen[0]["status"]) == (0, 2, "active")
            await answer(api, expert["token"], 152, {"grade": 1})
            await asyncio.wait_for(watcher, 30)  # ends by itself once completed
            assert seen[-1]["status"] == "completed" and seen[-1]["done"] == 2
            assert [s["done"] for s in seen] == sorted(s["done"] for s in seen)

            with pytest.raises(ClientError) as refused:
                async for _ in client.progress("not-a-project"):
                    pass
            assert refused.value.code == "NOT_FOUND"
            with pytest.raises(ClientError) as bad:
                await client.create_project("bad", [{"skill": "grading"}])
            assert bad.value.status == 422 and bad.value.code == "BAD_INPUT"
            assert pid


async def test_results_resume_from_the_cursor_and_export_streams_to_a_file(
    served: ServeProcess, tmp_path: Path
) -> None:
    async with Api(served.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        async with CustomerClient(served.url, customer["token"]) as client:
            pid = (await client.create_project("feed", tasks_of("grading", 5)))["project_id"]
            await answer(api, expert["token"], 3, {"grade": 2})
            feed = client.result_changes(pid)
            feed.page_size = 2  # more than one page
            first = [c async for c in feed]
            assert len(first) == 3 and all(c["change"] == "resolved" for c in first)
            cursor = feed.cursor
            assert cursor == first[-1]["cursor"]
            # nothing new: the resumed feed is empty, then it yields only what came since
            assert [c async for c in client.result_changes(pid, after=cursor)] == []
            await answer(api, expert["token"], 2, {"grade": 4})
            rest = [c async for c in client.result_changes(pid, after=cursor)]
            assert len(rest) == 2
            items = {c["item_id"] for c in first + rest}
            assert len(items) == 5

            # the export: the same rows the REST route streams, and its position
            target = tmp_path / "out" / "feed.jsonl"
            target.parent.mkdir()
            as_of = await client.export(pid, target)
            rows = [json.loads(line) for line in target.read_text().splitlines()]
            assert {r["item_id"] for r in rows} == items and {r["as_of"] for r in rows} == {as_of}
            r = await api.rest("GET", f"/v1/projects/{pid}/export?as_of={as_of}", customer["token"])
            assert r.content == target.read_bytes()
            # an export as of an earlier position; the feed after it is what came since
            early = await client.export(pid, tmp_path / "early.jsonl", as_of=cursor)
            assert len((tmp_path / "early.jsonl").read_text().splitlines()) == 3
            assert len([c async for c in client.result_changes(pid, after=early)]) == 2
            # a refused export writes nothing
            with pytest.raises(ClientError) as bad:
                await client.export(pid, tmp_path / "x.csv", format="xml")
            assert bad.value.status == 422
            assert sorted(p.name for p in tmp_path.iterdir() if "x.csv" in p.name) == []


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A customer client in Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


async def test_the_readme_customer_example_runs(served: ServeProcess, tmp_path: Path) -> None:
    code = _readme_example()
    assert len(code.strip().splitlines()) <= 20
    async with Api(served.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        script = tmp_path / "customer.py"
        script.write_text(code)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TASKROUTE_URL": served.url,
               "CUSTOMER_TOKEN": customer["token"]}  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
            assert line == b"0 of 2 answers\n", (line, await proc.stderr.read())
            await answer(api, expert["token"], 2, {"grade": 3})
            out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
        finally:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()
        assert proc.returncode == 0, err
        lines = out.decode().splitlines()
        assert lines[-1].startswith("exported as of ") and "resume the feed after" in lines[-1]
        results = [x for x in lines if re.match(r"[0-9a-f-]{36} resolved \{'grade': 3\}$", x)]
        assert len(results) == 2
        exported = (tmp_path / "essays.jsonl").read_text().splitlines()
        assert len(exported) == 2
