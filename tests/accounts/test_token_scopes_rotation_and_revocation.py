"""Credentials (issue 18): several labelled tokens per account, revocation on every process
within a second (closing WebSockets), rotation with a grace period, expiry, scoped tokens."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    get_named_type,
)

from taskroute import rest
from taskroute.schema.build import build_schema

from ..helpers import ADMIN_TOKEN, Api, tasks_of
from ..procs import ServeProcess
from ..ws import PROJECT_PROGRESS, TASK_AVAILABLE, WsClient
from .test_credential_cache_invalidation import MARGIN, eventually

ME = "{ me { role credentialId readOnly projectId } }"
CREATE = """mutation($c: ID, $e: ID, $l: String, $r: Boolean!, $p: ID, $x: DateTime) {
  createCredential(customerId: $c, expertId: $e, label: $l, readOnly: $r, projectId: $p,
                   expiresAt: $x) {
    token credential { id label readOnly projectId expiresAt revokedAt } } }"""
REVOKE = 'mutation($i: ID!) { revokeCredential(id: $i, reason: "leaked") { id revokedAt } }'
ROTATE = """mutation($i: ID!, $g: Int!) { rotateCredential(id: $i, graceSeconds: $g) {
  token credential { id rotatedFrom } } }"""


async def issue(api: Api, token: str = ADMIN_TOKEN, **kw: Any) -> dict[str, Any]:
    variables = {"c": None, "e": None, "l": None, "r": False, "p": None, "x": None, **kw}
    return (await api.gql(CREATE, variables, token))["createCredential"]


async def code_of(api: Api, query: str, token: str, variables: Any = None) -> str | None:
    body = await api.gql_raw(query, variables, token)
    if not body.get("errors"):
        return None
    return body["errors"][0]["extensions"]["code"]


async def test_several_labelled_tokens_listed_without_secrets(api: Api) -> None:
    customer = await api.create_customer()
    a = await issue(api, c=customer["id"], l="ci pipeline")
    b = await issue(api, customer["token"], l="laptop")  # customers make their own
    for t in (a["token"], b["token"]):
        assert (await api.gql(ME, token=t))["me"]["role"] == "customer"
    listed = await api.gql(
        "query($c: ID) { credentials(customerId: $c) { id label revokedAt lastUsedAt } }",
        {"c": customer["id"]},
        ADMIN_TOKEN,
    )
    labels = sorted(c["label"] for c in listed["credentials"])
    assert labels == ["ci pipeline", "initial", "laptop"]
    assert all(c["lastUsedAt"] for c in listed["credentials"])  # each was used above
    mine = await api.gql("{ credentials { label } }", token=b["token"])
    assert sorted(c["label"] for c in mine["credentials"]) == labels
    other = await api.create_customer("other")
    assert await code_of(api, REVOKE, other["token"], {"i": a["credential"]["id"]}) == "NOT_FOUND"
    body = await api.gql_raw(CREATE, {"e": str(uuid.uuid4()), "r": False}, ADMIN_TOKEN)
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    body = await api.gql_raw(CREATE, {"r": False}, ADMIN_TOKEN)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"
    past = "2000-01-01T00:00:00+00:00"
    body = await api.gql_raw(CREATE, {"c": customer["id"], "r": False, "x": past}, ADMIN_TOKEN)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"


async def test_read_only_token_reads_progress_and_forecasts_and_is_refused_mutations(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    created = await api.create_project(customer["token"], tasks_of("grading", 2))
    pid = created["project"]["id"]
    ro = await issue(api, customer["token"], l="dashboard", r=True)
    token = ro["token"]
    assert (await api.progress(token, pid))["total"] == 2
    got = await api.gql(
        "query($p: ID!) { project(id: $p) { id forecast { remaining } } }", {"p": pid}, token
    )
    assert got["project"]["forecast"]["remaining"] == 2
    r = await api.rest("GET", f"/v1/projects/{pid}", token)
    assert r.status_code == 200
    before = await db.fetchval("SELECT count(*) FROM projects")
    for query, variables in (
        ("mutation($p: ID!) { cancelProject(id: $p) { id } }", {"p": pid}),
        (CREATE, {"r": False, "l": "escalate"}),
        (REVOKE, {"i": ro["credential"]["id"]}),
        ('mutation { createProject(input: {name: "x", tasks: []}) { accepted } }', None),
    ):
        assert await code_of(api, query, token, variables) == "FORBIDDEN", query
    for method, path in (("POST", "/v1/projects"), ("POST", "/v1/tasks/next")):
        r = await api.rest(method, path, token, json={"name": "x", "tasks": tasks_of("g", 1)})
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN", r.text
    assert await db.fetchval("SELECT count(*) FROM projects") == before
    assert await db.fetchval("SELECT status FROM projects WHERE id = $1", uuid.UUID(pid)) == (
        "active"
    )
    # an expert's read-only token is refused at creation
    expert = await api.create_expert(["grading"])
    body = await api.gql_raw(CREATE, {"e": expert["id"], "r": True}, ADMIN_TOKEN)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"


async def test_project_limited_token_sees_that_project_only(api: Api) -> None:
    customer = await api.create_customer()
    one = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
    two = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
    limited = (await issue(api, customer["token"], p=one, r=True))["token"]
    assert (await api.gql(ME, token=limited))["me"]["projectId"] == one
    assert (await api.progress(limited, one))["total"] == 1
    q = "query($p: ID!) { project(id: $p) { id } }"
    assert await code_of(api, q, limited, {"p": two}) == "NOT_FOUND"
    r = await api.rest("GET", f"/v1/projects/{two}", limited)
    assert r.status_code == 404
    listed = await api.gql("{ projects { edges { node { id } } } }", token=limited)
    assert [e["node"]["id"] for e in listed["projects"]["edges"]] == [one]
    other = await api.create_customer("other")
    body = await api.gql_raw(CREATE, {"r": False, "p": one}, other["token"])
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_rotated_token_old_value_dies_after_the_grace_period(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    cid = (await api.gql(ME, token=expert["token"]))["me"]["credentialId"]
    rotated = (await api.gql(ROTATE, {"i": cid, "g": 2}, expert["token"]))["rotateCredential"]
    new = rotated["token"]
    assert rotated["credential"]["rotatedFrom"] == cid
    assert (await api.gql(ME, token=new))["me"]["credentialId"] == rotated["credential"]["id"]
    assert await code_of(api, ME, expert["token"]) is None  # still in its grace period

    async def old_refused() -> bool:
        return await code_of(api, ME, expert["token"]) == "UNAUTHENTICATED"

    took = await eventually(old_refused, 2.0 + 5.0, "the old token expires")
    assert took >= 1.0  # it did live through (most of) the grace period
    assert await code_of(api, ME, new) is None
    assert await code_of(api, ROTATE, new, {"i": cid, "g": 0}) == "CONFLICT"
    assert await code_of(api, ROTATE, new, {"i": cid, "g": -1}) == "BAD_INPUT"
    actions = await api.gql(
        "query($s: ID) { adminAudit(subjectId: $s) { edges { node { action actor } } } }",
        {"s": cid},
        ADMIN_TOKEN,
    )
    assert {"action": "credential.rotate", "actor": f"credential:{cid}"} in [
        e["node"] for e in actions["adminAudit"]["edges"]
    ]


async def test_revocation_refused_on_every_process_and_closes_subscriptions(
    database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    servers = [ServeProcess(database_url, tmp_path / f"server{i}.log") for i in range(2)]
    await asyncio.gather(*(s.astart() for s in servers))
    clients = [Api(s.url) for s in servers]
    try:
        customer = await clients[0].create_customer()
        pid = (await clients[0].create_project(customer["token"], tasks_of("grading", 1)))[
            "project"
        ]["id"]
        dash = await issue(clients[0], customer["token"], l="wallboard", r=True)
        expert = await clients[0].create_expert(["audio"])
        for api in clients:  # cached on both processes
            for _ in range(2):
                assert await code_of(api, ME, dash["token"]) is None
        sockets = [WsClient(s.url, dash["token"]) for s in servers]
        expert_ws = WsClient(servers[1].url, expert["token"])
        for ws in (*sockets, expert_ws):
            await ws.open()
        for ws in sockets:
            await ws.subscribe(PROJECT_PROGRESS, {"p": pid})
            assert "data" in await ws.next()
        await expert_ws.subscribe(TASK_AVAILABLE, {"s": ["audio"]})

        # revoke over the API of process 0; process 1 learns it through NOTIFY
        await clients[0].gql(REVOKE, {"i": dash["credential"]["id"]}, ADMIN_TOKEN)

        async def refused_by(api: Api) -> float:
            async def refused() -> bool:
                return await code_of(api, ME, dash["token"]) == "UNAUTHENTICATED"

            return await eventually(refused, 1.0 + MARGIN, f"{api.base_url} refuses")

        await asyncio.gather(*(refused_by(api) for api in clients))
        for ws in sockets:
            assert await closed(ws) == 4403
        # deactivation closes the expert's subscription too
        await clients[0].gql(
            'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "left") {'
            " leasesReleased } }",
            {"e": expert["id"]},
            ADMIN_TOKEN,
        )
        assert await closed(expert_ws) == 4403
        assert (
            await db.fetchval("SELECT count(*) FROM admin_audit WHERE action = 'credential.revoke'")
            == 1
        )
    finally:
        for api in clients:
            await api.__aexit__()
        for s in servers:
            s.stop()


async def closed(ws: WsClient, timeout: float = 1.0 + MARGIN) -> int | None:
    """The close code once the server closes the connection (fails after `timeout`)."""
    assert ws.ws is not None
    try:
        while True:
            await asyncio.wait_for(ws.ws.recv(), timeout)
    except TimeoutError:
        pytest.fail("the server did not close the WebSocket in time")
    except Exception:
        return ws.ws.close_code


def _plausible(t: GraphQLInputType, ids: dict[str, str]) -> Any:
    """A well-typed value, so the request reaches the resolver (not variable validation)."""
    if isinstance(t, GraphQLNonNull):
        return _plausible(t.of_type, ids)
    if isinstance(t, GraphQLList):
        return [_plausible(t.of_type, ids)]
    if isinstance(t, GraphQLEnumType):
        return next(iter(t.values))
    if isinstance(t, GraphQLInputObjectType):
        return {
            name: _plausible(f.type, ids)
            for name, f in t.fields.items()
            if isinstance(f.type, GraphQLNonNull)
        }
    assert isinstance(t, GraphQLScalarType)
    return {
        "ID": ids["project"],
        "String": "x",
        "Int": 1,
        "Float": 0.5,
        "Boolean": False,
        "JSON": {"grade": 1},
        "DateTime": "2030-01-01T00:00:00Z",
    }[t.name]


def _selection(t: Any) -> str:
    return "{ __typename }" if isinstance(get_named_type(t), GraphQLObjectType) else ""


async def test_read_only_token_is_refused_every_mutation_and_every_rest_write(
    api: Api, db: asyncpg.Connection
) -> None:
    """Schema- and route-driven: a mutation or REST write added later is covered the day it
    is added. Every one answers FORBIDDEN / 403 and the database does not change."""
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("grading", 2)))["project"]["id"]
    token = (await issue(api, customer["token"], l="wallboard", r=True))["token"]
    assert (await api.progress(token, pid))["total"] == 2  # it does read
    tables = [
        r["relname"]
        for r in await db.fetch(
            "SELECT relname FROM pg_stat_user_tables"
            " WHERE relname NOT IN ('credential_last_use', 'schema_migrations')"
            # rewritten by background jobs whatever the requests do: the task-count
            # compactor folds deltas into counts (their sums are compared below instead),
            # and wake tickets expire
            " AND relname NOT IN ('task_counts', 'task_count_deltas',"
            " 'wake_tickets', 'wake_deliveries') ORDER BY relname"
        )
    ]
    counts = (
        "SELECT md5(string_agg(x::text, '' ORDER BY x::text)) FROM ("
        " SELECT project_id, skill, status, sum(n) FROM ("
        "  SELECT project_id, skill, status, n FROM task_counts"
        "  UNION ALL SELECT project_id, skill, status, n FROM task_count_deltas) u"
        " GROUP BY 1, 2, 3 HAVING sum(n) <> 0) x"
    )

    async def snapshot() -> dict[str, Any]:
        tables_now = {t: await db.fetchval(f"SELECT md5(string_agg(x::text, '' ORDER BY x::text))"
                                           f" FROM {t} x") for t in tables}  # fmt: skip
        return {**tables_now, "task counts (summed)": await db.fetchval(counts)}

    before = await snapshot()
    schema = build_schema()._schema
    assert schema.mutation_type is not None
    refused = []
    for name, field in sorted(schema.mutation_type.fields.items()):
        args = {a: f.type for a, f in field.args.items()}
        decl = ", ".join(f"${a}: {t}" for a, t in args.items())
        call = ", ".join(f"{a}: ${a}" for a in args)
        doc = (
            f"mutation{f'({decl})' if decl else ''} {{ {name}"
            f"{f'({call})' if call else ''} {_selection(field.type)} }}"
        )
        variables = {a: _plausible(t, {"project": pid}) for a, t in args.items()}
        body = await api.gql_raw(doc, variables, token)
        codes = {e.get("extensions", {}).get("code") for e in body.get("errors") or []}
        assert codes == {"FORBIDDEN"}, (name, body)
        refused.append(name)
    assert len(refused) == len(schema.mutation_type.fields) >= 26
    writes = [
        (method, route.path.replace("{id}", pid))
        for route in rest.routes
        for method in sorted(getattr(route, "methods", None) or ())
        if method not in ("GET", "HEAD")
    ]
    assert len(writes) >= 9
    for method, path in writes:
        r = await api.rest(method, path, token, json={"name": "x", "tasks": tasks_of("g", 1)})
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN", (path, r.text)
    assert await snapshot() == before
