"""Hostile input: GraphQL limiters, body size, list caps, introspection, error masking,
values Postgres would refuse, hashed tokens, WebSocket origins. Nothing bad is ever written."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
import websockets

from taskroute.observability import metrics
from taskroute.resolvers import projects

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, InProcessServer, settings_for, tasks_of
from ..ws import LEGACY_WS, TRANSPORT_WS, WsClient

GRJ = "application/graphql-response+json"


@pytest_asyncio.fixture
async def strict(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Api, InProcessServer]]:
    """A server configured as for production: small limits, no introspection, one origin."""
    settings = settings_for(
        database_url, tmp_path, max_body_bytes=64 * 1024, max_tasks_per_request=50,
        introspection=False, allowed_origins=("https://app.example",),
    )  # fmt: skip
    srv = InProcessServer(settings)
    await srv.start()
    async with Api(srv.url) as api:
        yield api, srv
    await srv.stop()


async def gql(api: Api, query: str, variables: Any = None, token: str = ADMIN_TOKEN):
    r = await api.http.post(
        "/graphql",
        json={"query": query, "variables": variables or {}},
        headers={"Authorization": f"Bearer {token}", "Accept": GRJ},
    )
    return r.status_code, r.json()


def codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


async def test_depth_token_and_alias_limits(api: Api) -> None:
    # Introspection fields are exempt from the depth limit and the core schema is shallow, so
    # the limiter is shown on a deep document (field validity is checked separately).
    deep = '{ project(id: "x") ' + "{ a " * 14 + "}" * 15
    status, body = await gql(api, deep)
    assert status == 400 and set(codes(body)) == {"BAD_INPUT"}
    assert any("exceeds maximum operation depth" in e["message"] for e in body["errors"])

    many = ", ".join(['"s"'] * 6000)
    status, body = await gql(
        api, f"mutation {{ claimNextTask(skills: [{many}]) {{ assignmentId }} }}"
    )
    assert status == 400 and codes(body) == ["BAD_INPUT"]
    assert "tokens" in body["errors"][0]["message"]

    aliases = " ".join(f"a{i}: __typename" for i in range(31))
    status, body = await gql(api, f"{{ {aliases} }}")
    assert status == 400 and codes(body) == ["BAD_INPUT"]
    assert "aliases" in body["errors"][0]["message"]
    # At the limits themselves, fine.
    status, body = await gql(api, "{ " + " ".join(f"a{i}: __typename" for i in range(30)) + " }")
    assert status == 200 and "errors" not in body


async def test_long_number_literals_are_bad_input(api: Api) -> None:
    """graphql-core converts Int literals with int(): past Python's 4300-digit limit that
    raised inside validation and answered INTERNAL."""
    for literal in ("9" * 5000, "9" * 41, "1" + "0" * 60 + ".5"):
        status, body = await gql(api, f"{{ auditLog(limit: {literal}) {{ nextCursor }} }}")
        assert status == 400 and set(codes(body)) == {"BAD_INPUT"}, (literal[:8], body)
    status, body = await gql(api, "{ auditLog(limit: 5) { nextCursor } }")
    assert status == 200, body


async def test_repeated_fields_and_fragments_are_bounded(api: Api) -> None:
    """Duplicate fields and fragment spreads cannot dodge the cost bound: fields are counted
    with every repetition and every spread expanded (within the token limit)."""
    status, body = await gql(api, "{ " + "__typename " * 1001 + "}")
    assert status == 400 and set(codes(body)) == {"BAD_INPUT"}, body
    assert "1000 fields" in body["errors"][0]["message"]
    # 40 spreads of a 40-field fragment: a small document, 1600 fields of work.
    frag = "fragment F on Query { " + "__typename " * 40 + "}"
    status, body = await gql(api, "{ " + "...F " * 40 + "} " + frag)
    assert status == 400 and set(codes(body)) == {"BAD_INPUT"}, body
    assert "1000 fields" in body["errors"][0]["message"]
    # graphql-core's own budget for comparing overlapping fields refuses ~1000 identical
    # ones too ("Validation aborted."); a few hundred are fine.
    status, body = await gql(api, "{ " + "__typename " * 200 + "}")
    assert status == 200 and "errors" not in body, body


async def test_body_size_limit(strict: tuple[Api, InProcessServer], db: asyncpg.Connection) -> None:
    api, _ = strict
    customer = await api.create_customer()
    big = {"name": "big", "tasks": [{"skill": "s", "payload": {"t": "x" * 70_000}}]}
    r = await api.rest("POST", "/v1/projects", customer["token"], json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    query = "mutation($i: CreateProjectInput!) { createProject(input: $i) { accepted } }"
    r = await api.http.post(
        "/graphql", json={"query": query, "variables": {"i": big}},
        headers={"Authorization": f"Bearer {customer['token']}"},
    )  # fmt: skip
    assert r.status_code == 413

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while streaming
        yield b'{"name": "big", "tasks": [{"skill": "s", "payload": "'
        for _ in range(20):
            yield b"x" * 8192
        yield b'"}]}'

    r = await api.http.post(
        "/v1/projects", content=chunks(),
        headers={"Authorization": f"Bearer {customer['token']}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    assert r.status_code == 413

    async def graphql_chunks() -> AsyncIterator[bytes]:
        yield b'{"query": "mutation { claimNextTask { assignmentId } }", "variables": {"x": "'
        for _ in range(20):
            yield b"x" * 8192
        yield b'"}}'

    r = await api.http.post(
        "/graphql", content=graphql_chunks(),
        headers={"Authorization": f"Bearer {customer['token']}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_list_caps(strict: tuple[Api, InProcessServer], db: asyncpg.Connection) -> None:
    api, _ = strict
    customer = await api.create_customer()
    with pytest.raises(GraphQLError) as err:
        await api.create_project(customer["token"], tasks_of("s", 51))
    assert err.value.code == "BAD_INPUT"
    r = await api.rest("POST", "/v1/projects", customer["token"],
                       json={"name": "n", "tasks": tasks_of("s", 51)})  # fmt: skip
    assert r.status_code == 422
    with pytest.raises(GraphQLError) as err:
        await api.create_expert([f"s{i}" for i in range(201)])
    assert err.value.code == "BAD_INPUT"
    expert = await api.create_expert(["s"])
    with pytest.raises(GraphQLError) as err:
        await api.claim(expert["token"], [f"s{i}" for i in range(201)])
    assert err.value.code == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM projects") == 0
    assert await db.fetchval("SELECT count(*) FROM experts") == 1


async def test_introspection_switch(api: Api, strict: tuple[Api, InProcessServer]) -> None:
    status, body = await gql(api, "{ __schema { queryType { name } } }")
    assert status == 200 and body["data"]["__schema"]["queryType"]["name"] == "Query"
    strict_api, _ = strict
    status, body = await gql(strict_api, "{ __schema { queryType { name } } }")
    assert status == 400 and set(codes(body)) == {"BAD_INPUT"}
    assert "introspection" in body["errors"][0]["message"].lower()
    status, body = await gql(strict_api, "{ __typename }")  # not introspection of the schema
    assert status == 200


async def test_internal_errors_are_masked(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "SELECT token_hash FROM credentials -- relation internals"

    async def broken(*args: Any) -> Any:
        raise RuntimeError(secret)

    monkeypatch.setattr(projects, "get_project", broken)
    customer = await api.create_customer()
    pid = "00000000-0000-0000-0000-000000000001"
    r = await api.http.post(
        "/graphql", json={"query": "query($p: ID!) { project(id: $p) { id } }",
                          "variables": {"p": pid}},
        headers={"Authorization": f"Bearer {customer['token']}"},
    )  # fmt: skip
    assert r.status_code == 200
    assert r.json()["errors"][0] == {
        "message": "Unexpected error.", "locations": [{"line": 1, "column": 18}],
        "path": ["project"], "extensions": {"code": "INTERNAL"},
    }  # fmt: skip
    r = await api.rest("GET", f"/v1/projects/{pid}", customer["token"])
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "INTERNAL", "message": "Unexpected error."}}
    assert r.headers["x-request-id"]
    for text in (r.text,):
        assert "SELECT" not in text and "Traceback" not in text


# Values that reach Postgres unless validation stops them: each must be a clean BAD_INPUT.
NASTY_JSON = [
    '"a\\u0000b"',  # NUL: jsonb refuses \u0000
    '{"k\\u0000": 1}',
    '"\\ud800"',  # a lone surrogate
    "1e400",  # Infinity after parsing
    "NaN",
    "[" * 100 + "]" * 100,  # deeper than 64
]


async def test_values_postgres_would_refuse(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    await api.create_project(customer["token"], tasks_of("s", 1))
    claim = await api.claim(expert["token"])
    assert claim is not None
    headers = {"Content-Type": "application/json"}
    for raw in NASTY_JSON:
        # As a task payload, a gold answer and an answer, through REST ...
        for task in (f'{{"skill": "s", "payload": {raw}}}',
                     f'{{"skill": "s", "payload": 1, "gold": {raw}}}'):  # fmt: skip
            body = f'{{"name": "n", "tasks": [{task}]}}'
            r = await api.rest("POST", "/v1/projects", customer["token"], content=body,
                               headers=dict(headers))  # fmt: skip
            assert r.status_code == 422, (raw, r.text)
        path = f"/v1/assignments/{claim['assignmentId']}/submit"
        r = await api.rest("POST", path, expert["token"], content=f'{{"answer": {raw}}}',
                           headers=dict(headers))  # fmt: skip
        assert r.status_code == 422, (raw, r.text)
        # ... and through GraphQL variables.
        q = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id } }"
        body = f'{{"query": "{q.replace(chr(34), chr(92) + chr(34))}", "variables": '
        body += f'{{"a": "{claim["assignmentId"]}", "x": {raw}}}}}'
        r = await api.http.post(
            "/graphql", content=body, headers={**headers, "Accept": GRJ,
                                               "Authorization": f"Bearer {expert['token']}"},
        )  # fmt: skip
        assert r.status_code in (200, 400), (raw, r.text)
        assert codes(r.json()) == ["BAD_INPUT"], (raw, r.text)
    for deadline in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        r = await api.rest("POST", "/v1/projects", customer["token"],
                           json={"name": "n", "deadline": deadline, "tasks": []})  # fmt: skip
        assert r.status_code == 422, (deadline, r.text)
        with pytest.raises(GraphQLError) as err:
            await api.create_project(customer["token"], [], deadline=deadline)
        assert err.value.code == "BAD_INPUT"
    for name in ("nul\x00name", "\ud800"):
        r = await api.rest(
            "POST", "/v1/projects", customer["token"],
            content=json.dumps({"name": name, "tasks": []}), headers=dict(headers),
        )  # fmt: skip
        assert r.status_code == 422, (name, r.text)
    # Bodies Python's json module itself chokes on: a 400/422, never a 500.
    for raw in ("[" * 100_000, '{"answer": ' + "9" * 5000 + "}"):
        r = await api.rest("POST", f"/v1/assignments/{claim['assignmentId']}/submit",
                           expert["token"], content=raw, headers=dict(headers))  # fmt: skip
        assert r.status_code == 422, r.text
        r = await api.http.post(
            "/graphql", content=raw, headers={**headers, "Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        assert r.status_code == 400, r.text
    nested = "[" * 3000 + "]" * 3000
    status, body = await gql(
        api, f'mutation {{ submit(assignmentId: "x", answer: {nested}) {{ id }} }}'
    )
    assert status == 400 and codes(body) == ["BAD_INPUT"]
    assert await db.fetchval("SELECT count(*) FROM projects") == 1
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE status = 'submitted'") == 0
    assert await db.fetchval("SELECT count(*) FROM payouts") == 0


async def test_tokens_are_stored_hashed(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    rows = await db.fetch("SELECT * FROM credentials")
    dump = repr([dict(r) for r in rows])
    for token in (customer["token"], expert["token"]):
        assert token not in dump
        digest = hashlib.sha256(token.encode()).digest()
        assert any(r["token_hash"] == digest for r in rows)
    # A token differing in one character does not authenticate.
    forged = expert["token"][:-1] + ("A" if expert["token"][-1] != "A" else "B")
    r = await api.rest("POST", "/v1/tasks/next", forged)
    assert r.status_code == 401


async def test_websocket_origins(strict: tuple[Api, InProcessServer]) -> None:
    _, srv = strict
    url = f"ws://127.0.0.1:{srv.port}/graphql"

    def refused() -> float:
        return metrics.HTTP_REQUESTS.labels("WS", "/graphql", "403")._value.get()

    before = refused()
    with pytest.raises(websockets.exceptions.InvalidStatus) as err:
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"],
                                      origin="https://evil.example"):  # fmt: skip
            pass
    assert err.value.response.status_code == 403
    # counted (and logged) as the refusal it is, not as an upgrade (101)
    assert refused() == before + 1
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"],
                                  origin="https://app.example") as ws:  # fmt: skip
        init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {ADMIN_TOKEN}"}}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"


async def test_http_client_sees_no_server_errors_on_garbage(api: Api) -> None:
    for raw in (b"\xff\xfe", b"null", b"[]", b'{"query": null}', b'{"query": "{"}'):
        r = await api.http.post("/graphql", content=raw,
                                headers={"Content-Type": "application/json"})  # fmt: skip
        assert r.status_code < 500, (raw, r.text)
    for path in ("/v1/tasks/next", "/v1/projects"):
        r = await api.http.post(path, content=b"\xff", headers={"Authorization": "Bearer x"})
        assert r.status_code == 401


def fan_out(levels: int, alias: str = "t", root: str = "Query") -> str:
    """Fragments each spreading the next twice: `levels` small fragments, 2**levels fields."""
    frags = [f"fragment F{i} on {root} {{ ...F{i + 1} ...F{i + 1} }}" for i in range(levels)]
    frags.append(f"fragment F{levels} on {root} {{ {alias}: __typename }}")
    kind = "subscription" if root == "Subscription" else "query"
    return f"{kind} {{ ...F0 }} " + " ".join(frags)


async def _graphql_calls(action: Any) -> tuple[int, Any]:
    """Python calls into graphql-core and strawberry while `action()` runs (the server runs
    in this thread): a count of work that does not depend on the machine's speed."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            name = frame.f_code.co_filename
            if "/graphql/" in name or "/strawberry/" in name or "schema/limits" in name:
                calls += 1

    sys.setprofile(profile)
    try:
        result = await action()
    finally:
        sys.setprofile(None)
    return calls, result


async def test_fragment_fan_out_is_refused_at_the_cost_of_its_size(api: Api) -> None:
    """Each fragment is counted once and multiplied by its spreads, before validation: a
    document of a few fragments each spreading the next twice is refused with work in
    proportion to its length. The depth and alias limits walked every expansion (2**levels),
    over every transport, before the field count refused it."""
    expert = await api.create_expert(["s"])
    token = expert["token"]

    async def post(query: str) -> tuple[int, Any]:
        return await gql(api, query, token=token)

    async def get(query: str) -> tuple[int, Any]:
        r = await api.http.get(
            "/graphql", params={"query": query},
            headers={"Authorization": f"Bearer {token}", "Accept": GRJ},
        )  # fmt: skip
        return r.status_code, r.json()

    def over_ws(protocol: str) -> Any:
        async def send(query: str) -> tuple[int, Any]:
            async with WsClient(api.base_url, token, protocol=protocol) as ws:
                op = await ws.subscribe(query)
                msg = await ws.next()
                assert msg["id"] == op
                return 400, msg

        return send

    callers = [("POST", post), ("GET", get),
               (TRANSPORT_WS, over_ws(TRANSPORT_WS)), (LEGACY_WS, over_ws(LEGACY_WS))]  # fmt: skip
    for label, send in callers:
        root = "Query" if label in ("POST", "GET") else "Subscription"
        work = []
        for levels in (11, 15):  # 2048 and 32768 fields expanded: both over the limit
            # a fresh alias each time: no cache can have seen the document
            query = fan_out(levels, alias=f"a{label[:2]}{levels}".replace("-", ""), root=root)
            calls, (status, body) = await _graphql_calls(lambda q=query, s=send: s(q))
            assert status == 400 and set(codes(body)) == {"BAD_INPUT"}, (label, body)
            messages = [e["message"] for e in body["errors"]]
            assert "the operation selects more than 1000 fields" in messages, (label, body)
            work.append(calls)
        # 16 times the expansion, four more fragments: about the same work.
        assert work[1] < 1.5 * work[0] + 500, (label, work)

    # Counted once but multiplied: the fan-out's aliases and depth are refused too ...
    status, body = await post(fan_out(5))  # 32 aliased fields in six small fragments
    assert status == 400 and codes(body) == ["BAD_INPUT"], body
    assert body["errors"][0]["message"] == "32 aliases found. Allowed: 30"
    chain = " ".join(f"fragment D{i} on Project {{ project {{ ...D{i + 1} }} }}" for i in range(13))
    status, body = await post(f'{{ project(id: "x") {{ ...D0 }} }} {chain} fragment D13 on '
                              "Project { id }")  # fmt: skip
    assert status == 400 and "exceeds maximum operation depth of 12" in str(body), body
    # ... while a document of about the same size without fan-out is served.
    fine = (
        "query { ...F0 } "
        + " ".join(f"fragment F{i} on Query {{ ...F{i + 1} x{i}: __typename }}" for i in range(20))
        + " fragment F20 on Query { __typename }"
    )
    status, body = await post(fine)
    assert status == 200 and "errors" not in body, body


async def test_documents_longer_than_the_lexer_reads_cheaply_are_refused(api: Api) -> None:
    """The token limit does not bound what the lexer reads: a comment (or a string literal)
    up to the body limit was read a character at a time. Past the length limit a document
    is refused before it is read, over HTTP and WebSocket alike."""
    expert = await api.create_expert(["s"])
    long = "{ __typename } #" + "x" * 150_000
    status, body = await gql(api, long, token=expert["token"])
    assert status == 400 and codes(body) == ["BAD_INPUT"], body
    assert "100000 characters" in body["errors"][0]["message"]
    async with WsClient(api.base_url, expert["token"]) as ws:
        op = await ws.subscribe("subscription { taskAvailable { skill } } #" + "x" * 150_000)
        msg = await ws.next()
        assert msg["id"] == op and msg["errors"][0]["extensions"]["code"] == "BAD_INPUT", msg
        assert "100000 characters" in msg["errors"][0]["message"]
    # within the limit, comments are fine
    status, body = await gql(api, "{ __typename } #" + "x" * 90_000, token=expert["token"])
    assert status == 200 and body == {"data": {"__typename": "Query"}}, body
