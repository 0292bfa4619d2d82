"""Subscriptions are bounded per socket and per credential; forecast subscribers share work.

One socket may not hold thousands of subscriptions, nor one token across sockets (each costs
a hub registration and a queue). `forecastUpdated` re-evaluates when the project's tasks change
and shares each evaluation among the project's subscribers, instead of one poll per subscriber.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect

from taskroute.resolvers import forecast as fc

from ..helpers import Api, serving, settings_for, tasks_of
from ..ws import LEGACY_WS, PROJECT_PROGRESS, TASK_AVAILABLE, TRANSPORT_WS, WsClient

FORECAST = "subscription($p: ID!) { forecastUpdated(projectId: $p) { forecast { remaining } } }"


@pytest_asyncio.fixture
async def small_budget(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(
        database_url,
        tmp_path,
        ws_max_subscriptions_per_socket=3,
        ws_max_subscriptions_per_credential=5,
        forecast_poll=3600.0,  # only task changes re-evaluate forecasts in these tests
    )
    async with serving(settings) as api:
        yield api


async def _error_code(ws: WsClient, op: str) -> str | None:
    """The code of the error the server sent for operation `op` (None if it sent data)."""
    while True:
        msg = await ws._recv()
        if msg.get("id") != op:
            continue
        if msg["type"] == "error":
            return msg["payload"][0]["extensions"]["code"]
        if msg["type"] == "next" and msg["payload"].get("errors"):
            return msg["payload"]["errors"][0]["extensions"]["code"]
        return None


async def test_subscriptions_per_socket_and_per_credential(small_budget: Api) -> None:
    api = small_budget
    customer = await api.create_customer()
    created = await api.create_project(customer["token"], tasks_of("s", 1))
    pid = created["project"]["id"]
    async with (
        WsClient(api.base_url, customer["token"]) as a,
        WsClient(api.base_url, customer["token"]) as b,
    ):
        for _ in range(3):
            op = await a.subscribe(PROJECT_PROGRESS, {"p": pid})
            assert await _error_code(a, op) is None  # the first counts arrive
        op = await a.subscribe(PROJECT_PROGRESS, {"p": pid})
        assert await _error_code(a, op) == "TOO_MANY_SUBSCRIPTIONS"  # 4th on one socket
        for _ in range(2):
            op = await b.subscribe(PROJECT_PROGRESS, {"p": pid})
            assert await _error_code(b, op) is None
        op = await b.subscribe(PROJECT_PROGRESS, {"p": pid})
        assert await _error_code(b, op) == "TOO_MANY_SUBSCRIPTIONS"  # 6th for the token
    # Closing the sockets gave the budget back.
    async with WsClient(api.base_url, customer["token"]) as c:
        op = await c.subscribe(PROJECT_PROGRESS, {"p": pid})
        assert await _error_code(c, op) is None
    # Another credential has its own budget.
    expert = await api.create_expert(["s"])
    async with WsClient(api.base_url, expert["token"]) as d:
        for _ in range(3):  # the expert's own budget: a hint for the open task each time
            op = await d.subscribe(TASK_AVAILABLE, {"s": None})
            assert await _error_code(d, op) is None


async def test_forecast_subscribers_of_a_project_share_each_evaluation(
    small_budget: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = small_budget
    calls = 0
    original = fc.project_forecast

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(fc, "project_forecast", counted)
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    created = await api.create_project(customer["token"], tasks_of("s", 3))
    pid = created["project"]["id"]
    sockets = [WsClient(api.base_url, customer["token"]) for _ in range(2)]
    for ws in sockets:
        await ws.open()
    try:
        ops = []
        for ws in sockets:
            for _ in range(2):  # 4 subscribers: within the fixture's budget of 5
                ops.append((ws, await ws.subscribe(FORECAST, {"p": pid})))
        for ws, _ in ops:  # everyone gets the current forecast (one message per operation)
            msg = await ws.next()
            assert msg.get("data"), msg
            assert msg["data"]["forecastUpdated"]["forecast"]["remaining"] == 3
        first_round = calls
        assert 1 <= first_round <= 2, first_round  # four subscribers, not four evaluations
        # A task is done: every subscriber hears of it, from a shared re-evaluation.
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"ok": 1})
        for ws, _ in ops:
            while True:
                msg = await ws.next()
                if msg["data"]["forecastUpdated"]["forecast"]["remaining"] == 2:
                    break
        assert calls - first_round <= 4, calls  # claim and submit: two changes at most, shared
    finally:
        for ws in sockets:
            await ws.close()


async def test_bad_subscription_documents_get_coded_errors_on_both_protocols(
    small_budget: Api,
) -> None:
    """A syntax error used to end in a bare `complete` (graphql-ws: silence) and an unhandled
    exception in the log; validation errors carried no code."""
    api = small_budget
    expert = await api.create_expert(["s"])
    for protocol in (TRANSPORT_WS, LEGACY_WS):
        async with WsClient(api.base_url, expert["token"], protocol=protocol) as ws:
            for document in ("subscription { taskAvailable {", "subscription { nope }"):
                op = await ws.subscribe(document)
                msg = await ws.next()
                assert msg["id"] == op and msg.get("errors"), (protocol, msg)
                assert msg["errors"][0]["extensions"]["code"] == "BAD_INPUT", (protocol, msg)
            # the socket stays usable: a good subscription is accepted (no error for it)
            created = await api.create_customer()
            await api.create_project(created["token"], tasks_of("s", 1), name=protocol)
            op = await ws.subscribe(TASK_AVAILABLE, {"s": None})
            msg = await ws.next()
            assert msg["id"] == op and not msg.get("errors"), msg


ISSUE = 'mutation { createCredential(label: "more") { token } }'


@pytest_asyncio.fixture
async def account_budget(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(
        database_url,
        tmp_path,
        ws_max_subscriptions_per_socket=3,
        ws_max_subscriptions_per_credential=5,
        ws_max_subscriptions_per_account=7,
        ws_connection_init_timeout=0.3,
    )
    async with serving(settings) as api:
        yield api


async def test_subscriptions_per_account_across_its_tokens(account_budget: Api) -> None:
    """A customer mints tokens freely: each token's budget alone let one account hold any
    number of subscriptions. The account's budget counts across its tokens."""
    api = account_budget
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("s", 1)))["project"]["id"]
    tokens = [customer["token"]]
    for _ in range(2):
        tokens.append((await api.gql(ISSUE, None, customer["token"]))["createCredential"]["token"])
    sockets = [WsClient(api.base_url, token) for token in tokens for _ in range(2)]
    for ws in sockets:
        await ws.open()
    try:
        held = 0
        for ws in sockets:  # two sockets per token, up to three subscriptions each
            for _ in range(3):
                op = await ws.subscribe(PROJECT_PROGRESS, {"p": pid})
                code = await _error_code(ws, op)
                if code is None:
                    held += 1
                else:
                    assert code == "TOO_MANY_SUBSCRIPTIONS", code
        assert held == 7  # the account's budget, though three tokens could hold 15
        # Another account is not affected.
        other = await api.create_customer("other")
        opid = (await api.create_project(other["token"], tasks_of("s", 1)))["project"]["id"]
        async with WsClient(api.base_url, other["token"], protocol=LEGACY_WS) as ws:
            op = await ws.subscribe(PROJECT_PROGRESS, {"p": opid})
            assert await _error_code(ws, op) is None
    finally:
        for ws in sockets:
            await ws.close()
    # Closing the sockets gave the account's budget back.
    async with WsClient(api.base_url, tokens[2]) as ws:
        op = await ws.subscribe(PROJECT_PROGRESS, {"p": pid})
        assert await _error_code(ws, op) is None


async def test_sockets_without_connection_init_are_closed_on_both_protocols(
    account_budget: Api,
) -> None:
    """graphql-transport-ws closed a socket that never sent `connection_init`; the legacy
    graphql-ws protocol kept it open for ever."""
    url = account_budget.base_url.replace("http://", "ws://") + "/graphql"
    for protocol in (TRANSPORT_WS, LEGACY_WS):
        async with connect(url, subprotocols=[protocol], ping_interval=None) as ws:  # type: ignore[list-item]
            # wait on the close itself (the server's deadline is the fixture's 0.3 s)
            await asyncio.wait_for(ws.wait_closed(), 20)
            assert ws.close_code == 4408, (protocol, ws.close_code)


async def test_every_malformed_frame_gets_a_protocol_answer(account_budget: Api) -> None:
    """A null payload, a list of variables, a non-string query, a query sent as a legacy
    `start`: each is answered (legacy: an `error` for its id; graphql-transport-ws: close 4400,
    as its spec says of invalid messages), never INTERNAL or a dropped socket."""
    api = account_budget
    expert = await api.create_expert(["s"])
    bad_payloads: list[Any] = [
        None,
        {"query": TASK_AVAILABLE, "variables": [1]},
        {"query": 12},
        {"query": ["{ me { role } }"]},
        {"query": TASK_AVAILABLE, "operationName": 3},
        "subscription { taskAvailable { skill } }",
    ]
    async with WsClient(api.base_url, expert["token"], protocol=LEGACY_WS) as ws:
        for n, payload in enumerate(bad_payloads):
            await ws._send({"id": f"b{n}", "type": "start", "payload": payload})
            msg = await ws.message()
            assert msg["type"] == "error" and msg["id"] == f"b{n}", (payload, msg)
            assert msg["payload"]["extensions"]["code"] == "BAD_INPUT", (payload, msg)
        for frame in ([1], {"type": "nope", "id": "x"}, {"id": "y"}, {"type": "stop"}):
            assert ws.ws is not None
            await ws.ws.send(json.dumps(frame))
            msg = await ws.message()
            assert msg["type"] == "error", (frame, msg)
            assert msg["payload"]["extensions"]["code"] == "BAD_INPUT", (frame, msg)
        # queries and mutations are not served as legacy `start`s: a coded error, not INTERNAL
        for document in (
            "{ me { role } }",
            'mutation { heartbeat(assignmentId: "x") { __typename } }',
        ):
            op = await ws.subscribe(document)
            msg = await ws.next()
            assert msg["id"] == op and msg["errors"][0]["extensions"]["code"] == "BAD_INPUT", msg
        # and the socket still serves a good subscription
        await api.create_project((await api.create_customer())["token"], tasks_of("s", 1))
        op = await ws.subscribe(TASK_AVAILABLE, {"s": None})
        msg = await ws.next()
        assert msg["id"] == op and msg["data"]["taskAvailable"]["skill"] == "s", msg
    for payload in bad_payloads:
        async with WsClient(api.base_url, expert["token"]) as ws:
            assert ws.ws is not None
            await ws._send({"id": "1", "type": "subscribe", "payload": payload})
            await asyncio.wait_for(ws.ws.wait_closed(), 20)
            assert ws.ws.close_code == 4400, (payload, ws.ws.close_code)
    async with WsClient(api.base_url, expert["token"]) as ws:
        assert ws.ws is not None
        await ws.ws.send("[1]")
        await asyncio.wait_for(ws.ws.wait_closed(), 20)
        assert ws.ws.close_code == 4400
