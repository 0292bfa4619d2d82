"""Through PgBouncer in transaction mode (Debian's 1.18: no prepared statements across
transactions): the request pool goes through it, LISTEN and migrations go to Postgres directly.

The multi-process tests (claim races, kill -9, wake-ups across processes) run through it too,
by the `db_route` fixture; these tests pin the pieces: the private PgBouncer really shares
server connections between clients, the pool's settings survive that, and a whole server
works behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.config import Settings
from taskroute.db.pool import Database, create_pool
from taskroute.db.queries import Q
from taskroute.realtime.backend import LISTENER_APPLICATION_NAME

from ..helpers import Api, InProcessServer, settings_for, tasks_of
from ..procs import PrivatePgBouncer
from ..ws import TASK_AVAILABLE, WsClient


@pytest.fixture
def small_bouncer(pg_admin_dsn: str) -> Iterator[PrivatePgBouncer]:
    """A PgBouncer with two server connections per database, shared by every client."""
    bouncer = PrivatePgBouncer(pg_admin_dsn, pool_size=2)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.mark.parametrize("cache_size", [100, 0])
async def test_a_statement_prepared_on_one_server_connection_is_missing_on_the_next(
    small_bouncer: PrivatePgBouncer, database_url: str, cache_size: int
) -> None:
    """The control: with asyncpg's statement cache on, a client's next transaction may run on
    another server connection than the one it prepared on, and fails. If the cached case ever
    passed, the fixture would not be pooling by transaction and the tests through it would
    prove nothing; with the cache off (what a pooled URL gets) the same steps work."""
    url = small_bouncer.url_for(database_url)
    client = await asyncpg.connect(url, statement_cache_size=cache_size)
    other = await asyncpg.connect(url, statement_cache_size=0)
    try:
        # prepared (and cached, with the cache on) on PgBouncer's only server connection
        assert await client.fetchval("SELECT $1::int + 1", 1) == 2
        # Another client's open transaction holds that server connection now, so PgBouncer
        # gives the client's next statement a second one, which never saw the preparation.
        async with other.transaction():
            await other.fetchval("SELECT 1")
            if cache_size:
                with pytest.raises(asyncpg.PostgresError, match="prepared statement"):
                    await client.fetchval("SELECT $1::int + 1", 1)
            else:
                assert await client.fetchval("SELECT $1::int + 1", 2) == 3
    finally:
        await client.close()
        await other.close()


def test_a_separate_direct_url_turns_the_statement_cache_off() -> None:
    direct = Settings(database_url="postgresql://a@pg:5432/t")
    assert direct.session_url(direct.database_url) == direct.database_url
    assert direct.pool_statement_cache(direct.database_url) == 100
    pooled = Settings(
        database_url="postgresql://a@bouncer:6432/t",
        direct_database_url="postgresql://a@pg:5432/t",
    )
    assert pooled.session_url(pooled.database_url) == "postgresql://a@pg:5432/t"
    assert pooled.pool_statement_cache(pooled.database_url) == 0
    # PgBouncer >= 1.21 with max_prepared_statements can keep them: the operator says so.
    explicit = Settings(
        database_url=pooled.database_url,
        direct_database_url=pooled.direct_database_url,
        statement_cache_size=100,
    )
    assert explicit.pool_statement_cache(explicit.database_url) == 100


async def test_the_pool_shares_two_server_connections_without_errors(
    small_bouncer: PrivatePgBouncer, database_url: str
) -> None:
    """Eight pooled connections, two server connections: statements with parameters, JSON
    codecs and transactions interleave without a prepared-statement error."""
    url = small_bouncer.url_for(database_url)
    settings = Settings(database_url=url, direct_database_url=database_url)
    pool = await create_pool(url, 8, 8, settings.pool_statement_cache(url))
    db = Database(pool, timeout=30)
    try:

        async def one(i: int) -> None:
            assert await db.fetchval("SELECT $1::int * 2", i) == 2 * i
            assert await db.fetchval("SELECT $1::jsonb", {"i": i}) == {"i": i}
            async with db.transaction() as conn:
                assert await conn.fetchval("SELECT $1::text || 'x'", str(i)) == f"{i}x"
                assert await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", i) is True

        await asyncio.gather(*(one(i) for i in range(200)))
    finally:
        await pool.close()


class _IntrospectionSpy(asyncpg.Connection):
    """Records the type oids asyncpg asks the server about (it knows the built-in scalars)."""

    asked: list[int]

    async def _introspect_types(self, typeoids: Any, timeout: Any) -> Any:
        self.asked.extend(typeoids)
        return await super()._introspect_types(typeoids, timeout)


async def test_no_statement_makes_asyncpg_learn_a_type_of_ours(database_url: str) -> None:
    """asyncpg learns a type it does not know with a query wrapped in a session-level
    `SET jit = off` and a later reset, which a transaction-mode pooler may run on two different
    server connections. Arrays of built-in types (uuid[], text[]) are learned that way once per
    connection (the leak is a JIT setting). A type our migrations define (the status domains)
    never is: Postgres describes a domain column as its base type, and a parameter written to
    one is cast to text in the statement."""
    conn = await asyncpg.connect(database_url, connection_class=_IntrospectionSpy)
    conn.asked = []
    try:
        for sql in Q.values():
            await conn.prepare(sql)
        ours = await conn.fetch(
            "SELECT format_type(oid, NULL) AS type FROM pg_type"
            " WHERE oid = ANY ($1::oid[]) AND (oid >= 16384 OR typelem >= 16384)",
            sorted(set(conn.asked)),
        )
    finally:
        await conn.close()
    assert conn.asked, "no statement asked about a type: the spy is not in the path"
    assert [r["type"] for r in ours] == []


@pytest_asyncio.fixture
async def bounced_server(
    pgbouncer: PrivatePgBouncer, database_url: str, tmp_path: Path
) -> AsyncIterator[InProcessServer]:
    settings = settings_for(
        pgbouncer.url_for(database_url), tmp_path, direct_database_url=database_url
    )
    srv = InProcessServer(settings)
    await srv.start()
    yield srv
    await srv.stop()


async def test_a_server_behind_pgbouncer_serves_and_listens_directly(
    bounced_server: InProcessServer, db: asyncpg.Connection
) -> None:
    async with Api(bounced_server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        sub = WsClient(api.base_url, expert["token"])
        await sub.open()
        try:
            await sub.subscribe(TASK_AVAILABLE, {"s": ["grading"]})
            created = await api.create_project(customer["token"], tasks_of("grading", 3))
            event = await sub.next(timeout=15)
            assert event["data"]["taskAvailable"]["projectId"] == created["project"]["id"]
        finally:
            await sub.close()
        claim = await api.claim(expert["token"])
        assert claim is not None
        beat = await api.heartbeat(expert["token"], claim["assignmentId"])
        assert beat["assignmentId"] == claim["assignmentId"]
        receipt = await api.submit(expert["token"], claim["assignmentId"], {"grade": 3})
        again = await api.submit(expert["token"], claim["assignmentId"], {"grade": 3})
        assert again["id"] == receipt["id"]
    assert await db.fetchval("SELECT count(*) FROM payouts") == 1
    # The LISTEN connection is a session of its own on Postgres: the client port Postgres
    # sees for the listener's backend is the listener's own socket, not one of PgBouncer's.
    hub = bounced_server.server.lifespan.state["services"].hub
    listener = hub.backend
    local_port = listener._conn._transport.get_extra_info("sockname")[1]
    seen = await db.fetchrow(
        "SELECT application_name, client_port FROM pg_stat_activity WHERE pid = $1",
        listener.backend_pid,
    )
    assert seen is not None
    assert (seen["application_name"], seen["client_port"]) == (
        LISTENER_APPLICATION_NAME,
        local_port,
    )
