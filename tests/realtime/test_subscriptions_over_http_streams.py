"""Subscriptions over HTTP streams (GraphQL over SSE, multipart subscriptions): for dashboards
behind proxies that block WebSockets. Authenticated like every request, refused clearly when
the client asks for neither stream nor WebSocket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from taskroute.resolvers.ingest import ASYNC_MIN_TASKS

from ..accounts.test_credential_cache_invalidation import MARGIN
from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, tasks_of
from ..ws import TASK_AVAILABLE

PROGRESS = "subscription($p: ID!) { projectProgress(projectId: $p) { total open claimed done } }"
SSE = "text/event-stream"
MULTIPART = 'multipart/mixed;subscriptionSpec="1.0", application/json'


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """(event, data) pairs of a GraphQL-over-SSE stream; comments (pings) are skipped."""
    event, data = None, ""
    async for line in response.aiter_lines():
        if line.startswith(":"):
            continue
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data += line.split(":", 1)[1].strip()
        elif line == "" and event is not None:
            yield event, json.loads(data) if data else None
            event, data = None, ""


async def multipart_payloads(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON parts of a multipart subscription stream (heartbeats `{}` skipped)."""
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\r\n--graphql" in buffer:
            part, buffer = buffer.split("\r\n--graphql", 1)
            body = part.split("\r\n\r\n", 1)[-1].strip()
            if body.startswith("{"):
                parsed = json.loads(body)
                if parsed:
                    yield parsed


async def project_with_expert(api: Api) -> tuple[dict[str, str], str, dict[str, str]]:
    customer = await api.create_customer()
    created = await api.create_project(customer["token"], tasks_of("grading", 3))
    expert = await api.create_expert(["grading"])
    return customer, created["project"]["id"], expert


async def test_progress_over_sse(api: Api) -> None:
    customer, project_id, expert = await project_with_expert(api)
    body = {"query": PROGRESS, "variables": {"p": project_id}}
    headers = {"Authorization": f"Bearer {customer['token']}", "Accept": SSE}
    async with api.http.stream("POST", "/graphql", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(SSE)
        events = sse_events(response)
        event, first = await anext(events)
        assert event == "next"
        assert first["data"]["projectProgress"] == {"total": 3, "open": 3, "claimed": 0, "done": 0}
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})
        async for event, payload in events:
            assert event == "next", (event, payload)
            if payload["data"]["projectProgress"]["done"] == 1:
                break


async def test_progress_over_multipart(api: Api) -> None:
    customer, project_id, expert = await project_with_expert(api)
    body = {"query": PROGRESS, "variables": {"p": project_id}}
    headers = {"Authorization": f"Bearer {customer['token']}", "Accept": MULTIPART}
    async with api.http.stream("POST", "/graphql", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("multipart/mixed")
        parts = multipart_payloads(response)
        first = await anext(parts)
        assert first["payload"]["data"]["projectProgress"]["open"] == 3
        claim = await api.claim(expert["token"])
        assert claim is not None
        async for part in parts:
            if part["payload"]["data"]["projectProgress"]["claimed"] == 1:
                break


async def test_streams_are_authenticated_and_scoped(api: Api) -> None:
    customer, project_id, _ = await project_with_expert(api)
    other = await api.create_customer("other")
    body = {"query": PROGRESS, "variables": {"p": project_id}}
    # No credential: refused before the document is read, as every request.
    for accept in (SSE, MULTIPART):
        r = await api.http.post("/graphql", json=body, headers={"Accept": accept})
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == "Bearer"
    # Another customer's project: the stream carries the error, coded, then completes.
    headers = {"Authorization": f"Bearer {other['token']}", "Accept": SSE}
    async with api.http.stream("POST", "/graphql", json=body, headers=headers) as response:
        seen = [(event, payload) async for event, payload in sse_events(response)]
    assert seen[0][0] == "next"
    assert seen[0][1]["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert seen[-1][0] == "complete"


async def test_subscription_without_a_stream_is_a_request_error(api: Api) -> None:
    _, project_id, _ = await project_with_expert(api)
    body = {"query": PROGRESS, "variables": {"p": project_id}}
    r = await api.http.post(
        "/graphql",
        json=body,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Accept": "application/json"},
    )
    assert r.status_code == 400, r.text
    message = r.json()["errors"][0]["message"]
    assert "text/event-stream" in message and "WebSocket" in message


ADD_TASKS = "mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) { added } }"


async def test_progress_pushes_on_added_tasks(api: Api) -> None:
    """addTasks (GraphQL, REST, and a batch big enough to be ingested in the background) is a
    change like a claim: the stream hears it without waiting for one."""
    customer, project_id, _ = await project_with_expert(api)
    body = {"query": PROGRESS, "variables": {"p": project_id}}
    headers = {"Authorization": f"Bearer {customer['token']}", "Accept": SSE}
    async with api.http.stream("POST", "/graphql", json=body, headers=headers) as response:
        events = sse_events(response)

        async def total_reaches(n: int) -> None:
            async def seen() -> None:
                async for event, payload in events:
                    assert event == "next", (event, payload)
                    if payload["data"]["projectProgress"]["total"] == n:
                        return

            await asyncio.wait_for(seen(), 10)

        await total_reaches(3)
        await api.gql(ADD_TASKS, {"p": project_id, "t": tasks_of("grading", 2)}, customer["token"])
        await total_reaches(5)
        r = await api.rest(
            "POST", f"/v1/projects/{project_id}/tasks", customer["token"],
            json={"tasks": tasks_of("grading", 1)},
        )  # fmt: skip
        assert r.status_code in (200, 201), r.text
        await total_reaches(6)
        r = await api.rest(
            "POST", f"/v1/projects/{project_id}/tasks", customer["token"],
            json={"tasks": tasks_of("grading", ASYNC_MIN_TASKS)},
        )  # fmt: skip
        assert r.status_code == 202, r.text
        await total_reaches(6 + ASYNC_MIN_TASKS)


REVOKE = 'mutation($i: ID!) { revokeCredential(id: $i, reason: "leaked") { id } }'
ROTATE = "mutation($i: ID!, $g: Int!) { rotateCredential(id: $i, graceSeconds: $g) { token } }"
DEACTIVATE = (
    'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "left") { leasesReleased } }'
)


async def stream_payloads(response: httpx.Response, accept: str) -> AsyncIterator[Any]:
    """The GraphQL results a stream carries, whichever transport (SSE: until `complete`)."""
    if accept == SSE:
        async for event, payload in sse_events(response):
            if event == "complete":
                return
            yield payload
    else:
        async for part in multipart_payloads(response):
            yield part["payload"]


@pytest.mark.parametrize("accept", [SSE, MULTIPART], ids=["sse", "multipart"])
@pytest.mark.parametrize("cause", ["revoked", "grace ended", "deactivated"])
async def test_stream_ends_when_its_credential_stops_authenticating(
    api: Api, clock: DbClock, accept: str, cause: str
) -> None:
    """As a WebSocket closes (tests/test_credentials.py): within a second, with the coded
    error, and no event after it."""
    customer, project_id, expert = await project_with_expert(api)
    cid = (await api.gql("{ me { credentialId } }", token=expert["token"]))["me"]["credentialId"]
    if cause == "grace ended":
        # long enough that only the database's clock (moved below) can end it
        await api.gql(ROTATE, {"i": cid, "g": 3600}, expert["token"])
    body = {"query": TASK_AVAILABLE, "variables": {"s": ["grading"]}}
    headers = {"Authorization": f"Bearer {expert['token']}", "Accept": accept}
    async with api.http.stream("POST", "/graphql", json=body, headers=headers) as response:
        assert response.status_code == 200
        payloads = stream_payloads(response, accept)
        first = await asyncio.wait_for(anext(payloads), 10)  # open tasks: a hint at once
        assert first["data"]["taskAvailable"]["projectId"] == project_id
        if cause == "revoked":
            await api.gql(REVOKE, {"i": cid}, ADMIN_TOKEN)
        elif cause == "grace ended":
            await clock.advance(3601)
        else:
            await api.gql(DEACTIVATE, {"e": expert["id"]}, ADMIN_TOKEN)
        # Wake-ups keep coming to a stream that is not ended: tasks keep opening.
        await api.gql(ADD_TASKS, {"p": project_id, "t": tasks_of("grading", 1)}, customer["token"])

        async def rest() -> list[Any]:
            return [p async for p in payloads]

        try:
            after = await asyncio.wait_for(rest(), 1.0 + MARGIN)
        except TimeoutError:
            pytest.fail(f"the stream went on after its credential was {cause}")
    assert after, "the stream ended without saying why"
    assert after[-1]["data"] is None
    assert after[-1]["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    # Refused as its requests are (the stream did not end early).
    r = await api.http.post("/graphql", json=body, headers=headers)
    assert r.status_code == 401
