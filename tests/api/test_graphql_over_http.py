"""GraphQL over HTTP: media types, status codes, GET vs POST (the GraphQL-over-HTTP spec)."""

from __future__ import annotations

import json

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api

GRJ = "application/graphql-response+json"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CREATE = 'mutation { createCustomer(name: "x") { id } }'


async def post(api: Api, body: object, accept: str | None, **headers: str):
    h = {**ADMIN, **headers}
    if accept is not None:
        h["Accept"] = accept
    return await api.http.post("/graphql", content=json.dumps(body), headers={
        "Content-Type": "application/json", **h})  # fmt: skip


async def post_raw(api: Api, body: object, headers: dict[str, str]):
    return await api.http.post("/graphql", content=json.dumps(body), headers={
        "Content-Type": "application/json", **headers})  # fmt: skip


async def test_success_in_either_media_type(api: Api) -> None:
    for accept, media in [(GRJ, GRJ), ("application/json", "application/json"),
                          (None, "application/json"), ("*/*", "application/json"),
                          (f"application/json;q=0.5, {GRJ}", GRJ),
                          (f"{GRJ};q=0.2, application/json", "application/json")]:  # fmt: skip
        r = await post(api, {"query": "{ __typename }"}, accept)
        assert r.status_code == 200, (accept, r.text)
        assert r.headers["content-type"].split(";")[0] == media, accept
        assert r.json() == {"data": {"__typename": "Query"}}


@pytest.mark.parametrize(
    "query, variables",
    [
        ("{ project(id: ", None),  # parse error
        ("{ nope }", None),  # validation error
        ("query($p: ID!) { project(id: $p) { id } }", {"p": {"not": "an id"}}),  # coercion
        ("query($p: ID!) { project(id: $p) { id } }", None),  # missing variable
    ],
)
async def test_request_errors_are_400_without_data(
    api: Api, query: str, variables: dict | None
) -> None:
    r = await post(api, {"query": query, "variables": variables}, GRJ)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith(GRJ)
    body = r.json()
    assert "data" not in body
    assert body["errors"] and all(e["extensions"]["code"] for e in body["errors"])
    # The legacy media type: 200 for a well-formed request, still no `data`.
    r = await post(api, {"query": query, "variables": variables}, "application/json")
    assert r.status_code == 200, r.text
    assert "data" not in r.json() and r.json()["errors"]


async def test_field_errors_keep_200_and_data(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    r = await api.http.post(
        "/graphql",
        json={"query": '{ project(id: "00000000-0000-0000-0000-000000000000") { id } }'},
        headers={"Accept": GRJ, "Authorization": f"Bearer {expert['token']}"},
    )
    assert r.status_code == 200
    body = r.json()
    assert body["data"] == {"project": None}
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_anonymous_requests_are_refused_before_parsing(api: Api) -> None:
    """No token, or an unknown one: 401 before the document is even read. A document that
    would not parse proves it: the answer is 401, not the parse error's 400."""
    broken = "{ " + "project(id: 1) { id } " * 2000  # unterminated, ~12k tokens
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic x"}):
        for accept in (GRJ, "application/json"):
            r = await post_raw(api, {"query": broken}, {"Accept": accept, **headers})
            assert r.status_code == 401, r.text
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert "data" not in r.json()
    # GraphiQL's page itself stays open to a browser.
    r = await api.http.get("/graphql", headers={"Accept": "text/html"})
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]


async def test_several_operations_need_an_operation_name(api: Api, db: asyncpg.Connection) -> None:
    doc = 'mutation M { createCustomer(name: "never") { id } } query Q { __typename }'
    for accept, status in ((GRJ, 400), ("application/json", 400)):
        r = await post(api, {"query": doc}, accept)
        assert r.status_code == status, r.text
        assert r.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    assert await db.fetchval("SELECT count(*) FROM customers WHERE name = 'never'") == 0
    r = await post(api, {"query": doc, "operationName": "Q"}, GRJ)
    assert r.status_code == 200 and r.json() == {"data": {"__typename": "Query"}}
    r = await post(api, {"query": doc, "operationName": 7}, GRJ)
    assert r.status_code == 400 and "operationName" in r.json()["errors"][0]["message"]


async def test_subscriptions_over_http_are_a_request_error(api: Api) -> None:
    expert = await api.create_expert(["s"])
    doc = "subscription { taskAvailable { skill } }"
    for accept, status in ((GRJ, 400), ("application/json", 400)):
        r = await post_raw(
            api, {"query": doc}, {"Accept": accept, "Authorization": f"Bearer {expert['token']}"}
        )
        assert r.status_code == status, r.text
        error = r.json()["errors"][0]
        assert error["extensions"]["code"] == "BAD_REQUEST" and "WebSocket" in error["message"]
    # named among other operations, the same
    named = "query Q { __typename } " + doc.replace("subscription", "subscription S")
    r = await post(api, {"query": named, "operationName": "S"}, GRJ)
    assert r.status_code == 400 and "WebSocket" in r.json()["errors"][0]["message"]


async def test_other_methods_get_a_json_405_with_allow(api: Api) -> None:
    for method in ("HEAD", "PUT", "DELETE", "PATCH"):
        r = await api.http.request(method, "/graphql", headers=ADMIN)
        assert r.status_code == 405, method
        assert r.headers["allow"] == "GET, POST"
        if method != "HEAD":
            assert r.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"


async def test_get_queries_and_405_for_mutations(api: Api, db: asyncpg.Connection) -> None:
    r = await api.http.get(
        "/graphql", params={"query": "query($x: Boolean!) { __typename @include(if: $x) }",
                            "variables": json.dumps({"x": True})},
        headers={**ADMIN, "Accept": GRJ},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json() == {"data": {"__typename": "Query"}}
    r = await api.http.get("/graphql", params={"query": CREATE}, headers={**ADMIN, "Accept": GRJ})
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert r.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"
    assert await db.fetchval("SELECT count(*) FROM customers") == 0  # halted, nothing written
    # The same mutation through POST works.
    assert (await post(api, {"query": CREATE}, GRJ)).status_code == 200
    assert await db.fetchval("SELECT count(*) FROM customers") == 1


async def test_malformed_http_requests(api: Api, db: asyncpg.Connection) -> None:
    cases = [
        (b"{not json", "application/json", 400),
        (b'{"variables": {}}', "application/json", 400),  # no query
        (b'{"query": 12}', "application/json", 400),
        (b'{"query": "{ __typename }", "variables": [1]}', "application/json", 400),
        (b"[1, 2]", "application/json", 400),  # batching is off
        (b"query=%7B__typename%7D", "application/x-www-form-urlencoded", 415),
        (CREATE.encode(), "text/plain", 415),
        (b'{"query": "{ __typename }"}', "", 415),
    ]
    for raw, content_type, status in cases:
        headers = {**ADMIN, "Accept": GRJ}
        if content_type:
            headers["Content-Type"] = content_type
        r = await api.http.post("/graphql", content=raw, headers=headers)
        assert r.status_code == status, (raw, r.status_code, r.text)
        assert r.headers["content-type"].startswith(GRJ)
        assert r.json()["errors"][0]["message"]
    assert await db.fetchval("SELECT count(*) FROM customers") == 0


async def test_unacceptable_media_type_is_406(api: Api) -> None:
    r = await post(api, {"query": "{ __typename }"}, "text/csv")
    assert r.status_code == 406
    r = await post(api, {"query": "{ __typename }"}, f"{GRJ};q=0, application/json;q=0")
    assert r.status_code == 406


async def test_other_methods_are_405(api: Api) -> None:
    r = await api.http.put("/graphql", json={"query": "{ __typename }"})
    assert r.status_code == 405
