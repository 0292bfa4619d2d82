"""Subscriptions over HTTP streams (GraphQL over SSE, multipart subscriptions): for dashboards
behind proxies that block WebSockets. Authenticated like every request, refused clearly when
the client asks for neither stream nor WebSocket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..helpers import ADMIN_TOKEN, Api, tasks_of

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
