"""The connection pool, with JSON codecs and a bounded wait for a free connection."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import orjson

from taskroute.db.admission import HELD, Admission, Priority
from taskroute.db.batched_probe import BatchedProbe
from taskroute.errors import TaskrouteError, Unavailable
from taskroute.observability.metrics import PROBES_UNANSWERED

log = logging.getLogger(__name__)

# Errors that mean "the database is not there right now", not "this request is wrong".
_CONNECTION_LOST = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.CannotConnectNowError,
    asyncpg.CrashShutdownError,
)


# orjson is several times faster than json for the payloads and answers every claim and
# submit carry; json stays the fallback for what orjson cannot hold exactly: integers beyond
# 64 bits (orjson refuses to encode them and silently decodes them as floats).
def _encode_json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def _decode_json(text: str) -> Any:
    """orjson's reading where it is exact: a document it reads without a float had no
    integer beyond 64 bits. Else json reads it (exact for every number). Looking at the
    values, not the text: a regex for a run of 19 digits cost 63 us on a 2 KB payload,
    50x orjson's own reading of it."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:  # e.g. a jsonb number beyond the double range
        return json.loads(text)
    return json.loads(text) if _has_float(value) else value


def _has_float(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            return True
    return False


async def _init_connection(conn: asyncpg.Connection) -> None:
    # json and jsonb are built-in types: asyncpg knows their oids and sends no introspection
    # query (whose session-level `SET jit` would leak through a transaction-mode pooler).
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, encoder=_encode_json, decoder=_decode_json, schema="pg_catalog"
        )


async def _reset_connection(conn: asyncpg.Connection) -> None:
    """What a connection needs before its next borrower: nothing beyond the rollback of an
    unfinished transaction, which asyncpg does before calling this. The application keeps no
    session state (no session advisory locks, LISTEN, cursors or SET on pooled connections;
    advisory locks are transaction-scoped, SET is SET LOCAL), which is also what lets the
    pool run through a transaction-mode PgBouncer; asyncpg's default reset (`RESET ALL; UNLISTEN
    *; ...`, one round trip per release) would only cost a round trip per request."""


async def create_pool(
    dsn: str, min_size: int = 2, max_size: int = 10, statement_cache_size: int = 100
) -> asyncpg.Pool:
    """`statement_cache_size=0` behind a transaction-mode pooler (PgBouncer < 1.21): asyncpg
    then never relies on a prepared statement outliving its own exchange, at the cost of a
    second Parse per statement (asyncpg >= 0.29 re-parses; see MagicStack/asyncpg#1065)."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_reset_connection,
        command_timeout=60,
        statement_cache_size=statement_cache_size,
    )
    assert pool is not None
    return pool


def _is_lost(conn: asyncpg.Connection) -> bool:
    try:
        closed: bool = conn.is_closed()
        return closed
    except asyncpg.InterfaceError:
        # The pool already took the proxy back: it does that when the connection died.
        return True


# Seconds a probe waits for its connection, and then for its statement (`Database.probe`).
PROBE_WAIT = 0.25
PROBE_TIMEOUT = 1.0


class ProbeUnanswered(Unavailable):
    """No probe connection within PROBE_WAIT, or no answer within PROBE_TIMEOUT."""

    def __init__(self) -> None:
        super().__init__("the database did not answer in time; try again shortly")


class Database:
    """The pool plus the policy for waiting on it: wait up to `timeout`, then UNAVAILABLE.

    With an `admission` gate (the server has one; see admission.py), a request whose line is
    full is refused at once and freed connections go to heartbeats and submits first."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        timeout: float,
        admission: Admission | None = None,
        default_priority: Priority = Priority.DEFAULT,
        probe_pool: asyncpg.Pool | None = None,
    ) -> None:
        self.pool = pool
        self.timeout = timeout
        self.admission = admission
        self.default_priority = default_priority
        # A connection apart from the gated pool for one-probe questions asked on the way to a
        # refusal (`probe`); None: they go through the gate as work in progress.
        self.probe_pool = probe_pool
        self._batched: dict[tuple[str, str], BatchedProbe] = {}

    def for_jobs(self) -> Database:
        """The same pool and gate, for background jobs: every statement they run is a JOB."""
        return Database(self.pool, self.timeout, self.admission, Priority.JOB, self.probe_pool)

    async def probe(self, query: str, key: str, value: Any) -> asyncpg.Record | None:
        """One cheap question asked before refusing a request: `query` takes a list of keys
        ($1) and returns at most one row per key in its column `key`; this is the row for
        `value`, or None. The probes asked at one moment share one statement (batched_probe.py)
        on the probe connections, apart from the gate and the pool it guards (a refusal means
        every pooled connection is busy), else through the gate as work in progress (PROTECT).
        ProbeUnanswered when the probe connection or the statement takes too long."""
        batched = self._batched.get((query, key))
        if batched is None:
            batched = self._batched[(query, key)] = BatchedProbe(self._probe_fetch, query, key)
        return await batched.get(value)

    async def _probe_fetch(self, query: str, keys: list[Any]) -> list[asyncpg.Record]:
        if self.probe_pool is None:
            async with self.connection(Priority.PROTECT) as conn:
                found: list[asyncpg.Record] = await conn.fetch(query, keys)
                return found
        try:
            conn = await self.probe_pool.acquire(timeout=min(self.timeout, PROBE_WAIT))
        except TimeoutError as exc:
            # Asked on the way to a refusal: waiting out the pool timeout here would make
            # every refusal slow.
            PROBES_UNANSWERED.labels("connection").inc(len(keys))
            raise ProbeUnanswered from exc
        except _CONNECTION_LOST as exc:
            raise Unavailable("the database is unreachable; try again shortly") from exc
        try:
            # asyncpg cancels the statement on timeout; the connection stays usable
            rows: list[asyncpg.Record] = await conn.fetch(query, keys, timeout=PROBE_TIMEOUT)
            return rows
        except TimeoutError as exc:
            PROBES_UNANSWERED.labels("answer").inc(len(keys))
            raise ProbeUnanswered from exc
        except _CONNECTION_LOST as exc:
            raise Unavailable("the database connection was lost; try again shortly") from exc
        finally:
            await self._release_to(self.probe_pool, conn)

    @asynccontextmanager
    async def connection(
        self, priority: Priority | None = None
    ) -> AsyncIterator[asyncpg.Connection]:
        if priority is None:
            priority = self.default_priority
        gate = self.admission
        if gate is not None:
            try:
                await gate.acquire(priority, self.timeout)
            except TimeoutError as exc:
                raise Unavailable("the database is busy; try again shortly") from exc
        held_from = time.monotonic()
        try:
            async with self._pooled() as conn:
                yield conn
        finally:
            if gate is not None:
                HELD[priority].observe(time.monotonic() - held_from)
                gate.release()

    @asynccontextmanager
    async def _pooled(self) -> AsyncIterator[asyncpg.Connection]:
        try:
            conn = await self.pool.acquire(timeout=self.timeout)
        except TimeoutError as exc:
            raise Unavailable("the database is busy; try again shortly") from exc
        except _CONNECTION_LOST as exc:
            raise Unavailable("the database is unreachable; try again shortly") from exc
        try:
            yield conn
        except TaskrouteError:
            raise
        except Exception as exc:
            # The server went away under this connection (restart, failover, network). What
            # asyncpg raises then varies (a Postgres error, an I/O error, or an InterfaceError
            # from a rollback on the dead socket): a closed connection says which case this is.
            # The pool replaces the connection on the next acquire. A COMMIT cut off here may
            # or may not have happened, so every write the API offers is safe to retry.
            if isinstance(exc, _CONNECTION_LOST) or _is_lost(conn):
                raise Unavailable("the database connection was lost; try again shortly") from exc
            raise
        finally:
            await self._release(conn)

    async def _release(self, conn: asyncpg.Connection) -> None:
        await self._release_to(self.pool, conn)

    async def _release_to(self, pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
        try:
            await pool.release(conn)
        except Exception as exc:
            # asyncpg terminates a connection it cannot reset, which returns its slot to the
            # pool; the request's outcome (already decided) must not be replaced by this.
            log.warning("discarded a broken database connection: %s", type(exc).__name__)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Snapshot]:
        """Several reads that must agree with each other (one read-only REPEATABLE READ
        transaction on one connection): a page that shows a project's status next to its
        ingest job must never show the job done and the project still ingesting."""
        async with (
            self.connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            yield Snapshot(conn)

    async def fetchrow(
        self, query: str, *args: Any, priority: Priority | None = None
    ) -> asyncpg.Record | None:
        async with self.connection(priority) as conn:
            return await conn.fetchrow(query, *args)

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        async with self.connection() as conn:
            rows: list[asyncpg.Record] = await conn.fetch(query, *args)
            return rows

    async def fetchval(self, query: str, *args: Any) -> Any:
        async with self.connection() as conn:
            return await conn.fetchval(query, *args)

    async def execute(self, query: str, *args: Any) -> str:
        async with self.connection() as conn:
            status: str = await conn.execute(query, *args)
            return status


class Snapshot:
    """Reads on one connection inside `Database.snapshot()`; the same read methods as
    `Database`, so read-side domain functions take either."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        return await self.conn.fetchrow(query, *args)

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self.conn.fetch(query, *args)
        return rows

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self.conn.fetchval(query, *args)


# What read-only domain functions accept: the pool, or one consistent snapshot of it.
Reader = Database | Snapshot
