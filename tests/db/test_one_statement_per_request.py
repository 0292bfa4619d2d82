"""A claim, a heartbeat and a submit each send one statement to Postgres, quality included.

Counted with asyncpg's query logger on every pooled connection of an in-process server. The
logger's callback runs in a copy of the calling task's context, so each statement is
attributed to the request (X-Request-ID) that sent it; background jobs have no request id and
are not counted. BEGIN and COMMIT would be counted too: there are none on these paths.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.db import pool as pool_module
from taskroute.observability.logs import request_id_var

from ..helpers import (
    ADMIN_TOKEN,
    CLAIM,
    CLAIM_TASK_FIELDS,
    Api,
    InProcessServer,
    claim_mutation,
    settings_for,
    tasks_of,
)

HEARTBEAT = "mutation($a: ID!) { heartbeat(assignmentId: $a) { leaseUntil hasHighPriorityTasks } }"
SUBMIT = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id } }"


class Statements:
    """Statements sent per request id."""

    def __init__(self) -> None:
        self.by_request: dict[str, list[str]] = defaultdict(list)

    def record(self, record: Any) -> None:
        rid = request_id_var.get()
        if rid is not None:
            self.by_request[rid].append(record.query)


@pytest_asyncio.fixture
async def counted(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Api, Statements]]:
    statements = Statements()
    original = pool_module._init_connection

    async def init(conn: asyncpg.Connection) -> None:
        await original(conn)
        conn.add_query_logger(statements.record)

    monkeypatch.setattr(pool_module, "_init_connection", init)
    srv = InProcessServer(settings_for(database_url, tmp_path))
    await srv.start()
    try:
        async with Api(srv.url) as api:
            yield api, statements
    finally:
        await srv.stop()


async def _gql(
    api: Api, statements: Statements, query: str, variables: dict[str, Any], token: str
) -> tuple[dict[str, Any], list[str]]:
    rid = uuid.uuid4().hex
    r = await api.http.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {token}", "X-Request-ID": rid},
    )
    body = r.json()
    assert r.status_code == 200 and "errors" not in body, body
    return body["data"], statements.by_request[rid]


async def _rest(
    api: Api, statements: Statements, path: str, token: str, body: Any = None
) -> tuple[int, list[str]]:
    rid = uuid.uuid4().hex
    r = await api.http.post(
        path, json=body, headers={"Authorization": f"Bearer {token}", "X-Request-ID": rid}
    )
    assert r.status_code in (200, 204), r.text
    return r.status_code, statements.by_request[rid]


async def test_claim_heartbeat_submit_are_one_statement_each(
    counted: tuple[Api, Statements],
) -> None:
    api, statements = counted
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], name=f"e{i}") for i in range(2)]
    created = await api.create_project(
        customer["token"], tasks_of("grading", 3), name="counted", redundancy=2
    )
    project_id = created["project"]["id"]
    # Every expert's first claim is gold (onboarding share 1 for one task), then real work.
    await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input: {goldRatio: 0,"
        " explorationGoldRatio: 1, explorationTasks: 1}) { goldRatio } }",
        {"p": project_id},
        ADMIN_TOKEN,
    )
    await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addGoldItems(projectId: $p, tasks: $t) }",
        {
            "p": project_id,
            "t": [{"skill": "grading", "payload": {"g": i}, "gold": 1} for i in range(2)],
        },
        customer["token"],
    )
    # Authentication is cached: warm each expert's entry first (that lookup is the one query
    # a token costs per process, then never again while the cache is trusted).
    for e in experts:
        r = await api.rest("POST", f"/v1/assignments/{uuid.uuid4()}/heartbeat", e["token"])
        assert r.status_code == 404  # authenticated, then not found

    counts: dict[str, list[int]] = defaultdict(list)
    for round_ in range(2):  # gold first, then real work (the second submit resolves the item)
        for e in experts:
            data, sent = await _gql(api, statements, CLAIM, {}, e["token"])
            counts["claim"].append(len(sent))
            assignment = data["claimNextTask"]["assignmentId"]
            _, sent = await _gql(api, statements, HEARTBEAT, {"a": assignment}, e["token"])
            counts["heartbeat"].append(len(sent))
            _, sent = await _gql(
                api, statements, SUBMIT, {"a": assignment, "x": {"grade": round_}}, e["token"]
            )
            counts["submit"].append(len(sent))
            _, sent = await _gql(
                api, statements, SUBMIT, {"a": assignment, "x": {"grade": round_}}, e["token"]
            )
            counts["repeated submit"].append(len(sent))
    assert all(n == 1 for ns in counts.values() for n in ns), dict(counts)
    # The rounds did what they claim: gold was scored, and the shared item was resolved.
    report = await api.gql(
        "query($p: ID!) { project(id: $p) { progress { done } } }",
        {"p": project_id},
        customer["token"],
    )
    assert report["project"]["progress"]["done"] == 2

    # REST: the same paths, the same count; nothing to claim is one statement too (204).
    e = experts[0]
    status, sent = await _rest(api, statements, "/v1/tasks/next", e["token"])
    assert status == 200 and len(sent) == 1, sent
    claimed = await api.claim(e["token"])
    assert claimed is not None
    aid = claimed["assignmentId"]
    _, sent = await _rest(api, statements, f"/v1/assignments/{aid}/heartbeat", e["token"])
    assert len(sent) == 1, sent
    _, sent = await _rest(
        api, statements, f"/v1/assignments/{aid}/submit", e["token"], {"answer": {"grade": 1}}
    )
    assert len(sent) == 1, sent
    status, sent = await _rest(api, statements, "/v1/tasks/next", experts[1]["token"])
    assert len(sent) == 1, sent


async def test_a_claim_with_instructions_stays_one_statement(
    counted: tuple[Api, Statements],
) -> None:
    """The claim returns the instructions' version; the text comes from a per-process cache
    keyed by (project, version), read on a miss, and only when the client asks for it."""
    from taskroute.resolvers import instructions

    api, statements = counted
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 1))
    await api.gql(
        'mutation($p: ID!) { setInstructions(projectId: $p, markdown: "# Grade it") { version } }',
        {"p": created["project"]["id"]},
        customer["token"],
    )
    r = await api.rest("POST", f"/v1/assignments/{uuid.uuid4()}/heartbeat", expert["token"])
    assert r.status_code == 404  # warms the credential cache
    with_text = claim_mutation(CLAIM_TASK_FIELDS + " instructions { version markdown }")
    data, sent = await _gql(api, statements, with_text, {}, expert["token"])
    assert data["claimNextTask"]["task"]["instructions"] == {"version": 1, "markdown": "# Grade it"}
    assert len(sent) == 1, sent  # the text was cached when it was set
    status, sent = await _rest(api, statements, "/v1/tasks/next", expert["token"])
    assert status == 200 and len(sent) == 1, sent
    # A cold cache: the text costs one read, and only when asked for.
    instructions._cache.clear()
    _, sent = await _gql(api, statements, CLAIM, {}, expert["token"])
    assert len(sent) == 1, sent
    _, sent = await _gql(api, statements, with_text, {}, expert["token"])
    assert len(sent) == 2, sent
    _, sent = await _gql(api, statements, with_text, {}, expert["token"])
    assert len(sent) == 1, sent
