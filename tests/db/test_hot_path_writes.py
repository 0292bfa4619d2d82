"""What the hot path does not write: a credential lookup whose last use is fresh takes no
transaction id (so it never waits for a WAL flush), and a claim and a submit in flight hold no
lock on their project's row (every expert of a big project inserts under that one row)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from taskroute.db.queries import Q
from taskroute.resolvers.accounts.credentials import hash_token

from ..helpers import Api, InProcessServer, settings_for, tasks_of


async def _world(database_url: str, tmp_path: Path) -> tuple[dict, dict]:
    srv = InProcessServer(settings_for(database_url, tmp_path))
    await srv.start()
    try:
        async with Api(srv.url) as api:
            customer = await api.create_customer()
            expert = await api.create_expert(["grading"])
            created = await api.create_project(customer["token"], tasks_of("grading", 3))
    finally:
        await srv.stop()
    return expert, created["project"]


async def test_a_lookup_with_a_fresh_last_use_writes_nothing(
    database_url: str, tmp_path: Path
) -> None:
    expert, _ = await _world(database_url, tmp_path)
    conn = await asyncpg.connect(database_url)
    try:
        token_hash = hash_token(expert["token"])
        writes = []
        for _ in range(2):  # the first records the use, the second finds it fresh
            async with conn.transaction():
                row = await conn.fetchrow(Q["credential_lookup"], token_hash)
                assert row is not None and row["expert_id"] is not None
                writes.append(await conn.fetchval("SELECT pg_current_xact_id_if_assigned()"))
        last_used = await conn.fetchval("SELECT count(*) FROM credential_last_use")
    finally:
        await conn.close()
    assert last_used >= 1
    assert writes[1] is None, writes


async def test_a_claim_and_a_submit_in_flight_leave_the_project_row_unlocked(
    database_url: str, tmp_path: Path
) -> None:
    expert, project = await _world(database_url, tmp_path)
    conn = await asyncpg.connect(database_url)
    other = await asyncpg.connect(database_url)

    async def project_row_free() -> bool:
        # NOWAIT: any lock an open transaction holds on the row refuses at once
        try:
            async with other.transaction():
                await other.execute(
                    "SELECT 1 FROM projects WHERE id = $1 FOR UPDATE NOWAIT", project["id"]
                )
            return True
        except asyncpg.LockNotAvailableError:
            return False

    try:
        async with conn.transaction():
            claim = await conn.fetchrow(Q["claim_call"], expert["id"], None, None, 0.99)
            assert claim["outcome"] == "claimed", dict(claim)
            claim_free = await project_row_free()
        async with conn.transaction():
            submit = await conn.fetchrow(
                Q["submit_call"], claim["assignment_id"], expert["id"], '{"grade": 1}'
            )
            assert submit["outcome"] == "stored", dict(submit)
            submit_free = await project_row_free()
    finally:
        await other.close()
        await conn.close()
    assert (claim_free, submit_free) == (True, True)
