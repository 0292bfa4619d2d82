"""A plain claim and submit fire the task-count trigger once each (the statements that move the
task) and never enter the tasks_finished trigger (the submit sets finished_at itself).

A tasks UPDATE fires the statement-level task-count trigger even when it changes no row, so
an idle UPDATE on the hot path (the claim's release of an expired lease the expert does not
hold, the resolution's cancel of an adjudication the item never had) costs a trigger call and
an INSERT. Counted with pg_stat_xact_user_functions in one transaction on one connection, so
nothing else (background jobs, other tests) is counted.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

from taskroute.db.queries import Q

from ..helpers import Api, InProcessServer, settings_for, tasks_of


async def test_claim_and_submit_fire_no_idle_task_trigger(
    database_url: str, tmp_path: Path
) -> None:
    srv = InProcessServer(settings_for(database_url, tmp_path))
    await srv.start()
    try:
        async with Api(srv.url) as api:
            customer = await api.create_customer()
            expert = await api.create_expert(["grading"])
            await api.create_project(customer["token"], tasks_of("grading", 2), name="idle")
    finally:
        await srv.stop()

    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute("SET LOCAL track_functions = 'all'")
            claim = await conn.fetchrow(Q["claim_call"], expert["id"], None, None, 0.99)
            assert claim["outcome"] == "claimed", dict(claim)
            submit = await conn.fetchrow(
                Q["submit_call"], claim["assignment_id"], expert["id"], '{"grade": 1}'
            )
            assert submit["outcome"] == "stored", dict(submit)
            calls = {
                r["funcname"]: r["calls"]
                for r in await conn.fetch("SELECT funcname, calls FROM pg_stat_xact_user_functions")
            }
            finished = await conn.fetchval(
                "SELECT finished_at IS NOT NULL FROM tasks WHERE id = $1", claim["task_id"]
            )
    finally:
        await conn.close()
    assert calls.get("taskroute_claim") == 1 and calls.get("taskroute_submit") == 1, calls
    # the claim's UPDATE (open -> claimed) and the submit's (claimed -> done), nothing idle
    assert calls.get("taskroute_task_counts_delta") == 2, calls
    assert "taskroute_task_finished" not in calls, calls
    assert finished
