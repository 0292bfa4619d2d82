"""What tests share: a small client for the public API, the claim mutation, waiting on a
condition, servers in the test's event loop, dropping test databases. Fixtures live in
conftest.py; tests import from here, never from conftest."""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn

from taskroute.config import Settings
from taskroute.server.app import create_app
from taskroute.server.websocket_protocol import SlimSansIOWebSocketProtocol

ADMIN_TOKEN = "admin-test-token"


async def wait_for(
    check: Callable[[], Awaitable[Any] | Any],
    what: str = "the condition",
    timeout: float = 30.0,
    every: float = 0.05,
) -> Any:
    """Poll until `check()` (plain or async) is truthy and return its value: background jobs
    (sweeper, routing, ingest) run on intervals, so tests wait on what they do, never on time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        await asyncio.sleep(every)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[Api]:
    """A server in this process with `settings`, and a client of it."""
    srv = InProcessServer(settings)
    await srv.start()
    try:
        async with Api(srv.url) as api:
            yield api
    finally:
        await srv.stop()


@asynccontextmanager
async def connections_held(
    api: Api, database_url: str, expert: dict[str, Any], n: int = 2, probes_too: bool = False
) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """`n` claims of `expert` hold `n` pooled connections, blocked on the expert's row, which
    a connection of our own locks until the block ends; yields the claims' tasks (they
    complete after it). Fills a small pool without any timing. `probes_too`: the whole
    experts and assignments tables are locked instead, so the held-claim probes (which read
    them) get no answer either, as from a saturated database."""
    locker = await asyncpg.connect(database_url)
    tx = locker.transaction()
    await tx.start()
    try:
        if probes_too:
            await locker.execute("LOCK TABLE experts, assignments IN ACCESS EXCLUSIVE MODE")
        else:
            await locker.execute("SELECT 1 FROM experts WHERE id = $1 FOR UPDATE", expert["id"])
        holders = [asyncio.create_task(api.claim(expert["token"])) for _ in range(n)]

        async def blocked() -> bool:
            return (
                await locker.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                )
                >= n
            )

        await wait_for(blocked, f"{n} claims blocked on the expert row", every=0.02)
        yield holders
    finally:
        await tx.rollback()
        await locker.close()


# The claim every test sends: the fields that cost no extra statement (priorAnswers does:
# add it with `claim_mutation`).
CLAIM_TASK_FIELDS = "id projectId skill priority payload payloadUrl answerSchema"


def claim_mutation(task_fields: str = CLAIM_TASK_FIELDS) -> str:
    return (
        "mutation($s: [String!], $p: ID) { claimNextTask(skills: $s, projectId: $p) {"
        f" assignmentId leaseUntil task {{ {task_fields} }} }} }}"
    )


CLAIM = claim_mutation()


class GraphQLError(AssertionError):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors
        self.code = errors[0].get("extensions", {}).get("code")


class Api:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        # Drop idle connections well before the server does (uvicorn: 5 s in tests), so a request
        # never races the server closing the connection it was about to reuse.
        limits = httpx.Limits(
            max_connections=200, max_keepalive_connections=200, keepalive_expiry=2
        )
        self.http = httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits)

    async def __aenter__(self) -> Api:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def gql_raw(
        self, query: str, variables: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = await self.http.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
        )
        return r.json()

    async def gql(
        self, query: str, variables: dict[str, Any] | None = None, token: str | None = None
    ) -> dict[str, Any]:
        body = await self.gql_raw(query, variables, token)
        if body.get("errors"):
            raise GraphQLError(body["errors"])
        return body["data"]

    async def rest(
        self, method: str, path: str, token: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return await self.http.request(method, path, headers=headers, **kwargs)

    # --- the common steps -------------------------------------------------------------

    async def create_customer(self, name: str = "acme") -> dict[str, str]:
        data = await self.gql(
            "mutation($n: String!) { createCustomer(name: $n) { id token } }",
            {"n": name},
            ADMIN_TOKEN,
        )
        return data["createCustomer"]

    async def create_expert(
        self, skills: list[str] | list[dict[str, Any]], name: str = "expert"
    ) -> dict[str, str]:
        skill_inputs = [s if isinstance(s, dict) else {"skill": s} for s in skills]
        data = await self.gql(
            "mutation($n: String!, $s: [SkillInput!]!) {"
            " createExpert(name: $n, skills: $s) { id token } }",
            {"n": name, "s": skill_inputs},
            ADMIN_TOKEN,
        )
        return data["createExpert"]

    async def create_project(
        self, token: str, tasks: list[dict[str, Any]], wait: bool = True, **fields: Any
    ) -> dict[str, Any]:
        """Create a project. A large batch is ingested in the background (accepted=true);
        with `wait` this returns only once all its tasks are stored and claimable."""
        data = await self.gql(
            "mutation($i: CreateProjectInput!) { createProject(input: $i) {"
            " accepted project { id status } } }",
            {"i": {"name": fields.pop("name", "batch"), "tasks": tasks, **fields}},
            token,
        )
        created = data["createProject"]
        if wait and created["accepted"]:
            await self.wait_ingested(token, created["project"]["id"])
        return created

    async def wait_ingested(self, token: str, project_id: str, timeout: float = 60) -> None:
        query = "query($p: ID!) { project(id: $p) { ingest { state error } } }"
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            ingest = (await self.gql(query, {"p": project_id}, token))["project"]["ingest"]
            if ingest is None or ingest["state"] == "done":
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"ingest did not finish: {ingest}")
            await asyncio.sleep(0.05)

    async def claim(self, token: str, skills: list[str] | None = None) -> dict[str, Any] | None:
        """Claim as an expert's tool does: a claim refused as overloaded (the server is past
        capacity or the claim's wait budget ran out; it changed nothing) is asked again after
        the Retry-After the server gave. Tests of the refusal itself post the mutation."""
        while True:
            try:
                data = await self.gql(CLAIM, {"s": skills}, token)
            except GraphQLError as exc:
                extensions = exc.errors[0].get("extensions", {})
                if extensions.get("reason") != "overloaded":
                    raise
                await asyncio.sleep(extensions["retryAfter"])
                continue
            return data["claimNextTask"]

    async def heartbeat(self, token: str, assignment_id: str) -> dict[str, Any]:
        data = await self.gql(
            "mutation($a: ID!) { heartbeat(assignmentId: $a) { assignmentId leaseUntil } }",
            {"a": assignment_id},
            token,
        )
        return data["heartbeat"]

    async def submit(self, token: str, assignment_id: str, answer: Any) -> dict[str, Any]:
        data = await self.gql(
            "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) {"
            " id assignmentId submittedAt payCents } }",
            {"a": assignment_id, "x": answer},
            token,
        )
        return data["submit"]

    async def progress(self, token: str, project_id: str) -> dict[str, int]:
        data = await self.gql(
            "query($p: ID!) { project(id: $p) { progress { total open claimed done failed } } }",
            {"p": project_id},
            token,
        )
        return data["project"]["progress"]


def tasks_of(skill: str, n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"skill": skill, "payload": {"text": f"item {i}"}, **extra} for i in range(n)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dsn_for(base: str, dbname: str) -> str:
    """The same server as `base`, database `dbname`."""
    return base.rsplit("/", 1)[0] + "/" + dbname


async def copy_database(admin_dsn: str, template: str) -> str:
    """A new database copied from `template` (CREATE DATABASE ... TEMPLATE); its name. The
    name carries the process id, so parallel test processes never collide."""
    name = f"taskroute_t_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    return name


def settings_for(database_url: str, tmp_path: Path, **overrides: object) -> Settings:
    """Settings of a test server on `database_url` (named so pytest does not collect it)."""
    base = {
        "database_url": database_url,
        "admin_token": ADMIN_TOKEN,
        "data_dir": str(tmp_path / "data"),
        "blob_url": f"file://{tmp_path / 'blobs'}",
        "sweep_interval": 0.2,
        "pool_max": 20,
    }
    base.update(overrides)
    return Settings(**base)  # type: ignore[arg-type]


class InProcessServer:
    """uvicorn serving the app on a free loopback port, inside the test's event loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.port = free_port()
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            ws=SlimSansIOWebSocketProtocol,  # as `taskroute serve` runs it
            ws_ping_interval=None,
        )
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task


@dataclass(frozen=True)
class DbRoute:
    """How server processes reach the test's database: `url` for the request pool
    (DATABASE_URL), `direct_url` for the LISTEN connection and migrations."""

    name: str
    url: str
    direct_url: str

    def env(self) -> dict[str, str]:
        """Environment for `ServeProcess` besides DATABASE_URL."""
        return {"TASKROUTE_DIRECT_DATABASE_URL": self.direct_url}


class Dropper:
    """Drops the tests' databases off the tests' path. DROP DATABASE makes Postgres 15 take a
    checkpoint of the whole server, which on a shared machine takes seconds; waited for after
    every test, those checkpoints were most of the suite's wall time. One thread drops what
    the tests hand it (several at a time, so their checkpoints coalesce); the session waits
    for the last one and fails if a drop failed."""

    BATCH = 8

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.names: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(),), daemon=True)
        self.thread.start()

    def drop(self, name: str) -> None:
        self.names.put(name)

    def close(self) -> None:
        self.names.put(None)
        self.thread.join()
        assert not self.errors, f"test databases left behind: {self.errors}"

    async def _run(self) -> None:
        while True:
            batch = [await asyncio.to_thread(self.names.get)]
            while len(batch) < self.BATCH and not self.names.empty():
                batch.append(self.names.get_nowait())
            names = [n for n in batch if n is not None]
            await asyncio.gather(*(self._drop(n) for n in names))
            if None in batch:
                return

    async def _drop(self, name: str) -> None:
        try:
            conn = await asyncpg.connect(self.admin_dsn)
            try:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError) as exc:
            self.errors.append(f"{name}: {exc}")
