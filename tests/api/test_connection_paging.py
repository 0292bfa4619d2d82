"""One way to page: every GraphQL listing is a connection (`first`, `after`, `pageInfo`) with
opaque cursors and one page cap, REST pages with the same cursors, and `hasNextPage` is exact
also when the last page is exactly full. The deprecated page shapes keep working."""

from __future__ import annotations

from typing import Any

import asyncpg

from ..helpers import ADMIN_TOKEN, Api, tasks_of

MAX_FIRST = 1000

ITEM_RESULTS = """query($p: ID!, $a: String, $f: Int!) {
  itemResults(projectId: $p, after: $a, first: $f) {
    edges { cursor node { itemId } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }"""
ITEM_CHANGES = """query($p: ID!, $a: String, $f: Int!) {
  itemResultChanges(projectId: $p, after: $a, first: $f) {
    edges { cursor node { itemId version change } } pageInfo { hasNextPage endCursor } } }"""
PAYLOAD_AUDIT = """query($p: ID, $a: String, $f: Int!) {
  payloadAudit(projectId: $p, after: $a, first: $f) {
    edges { cursor node { taskId action } } pageInfo { hasNextPage endCursor } } }"""

RESULTS = (
    "query($p: ID!, $a: String, $f: Int!) { results(projectId: $p, after: $a, first: $f)"
    " { cursor hasMore items { itemId } } }"
)
CHANGES = (
    "query($p: ID!, $a: String, $f: Int!) { resultChanges(projectId: $p, after: $a, first: $f)"
    " { cursor hasMore changes { cursor } } }"
)


async def _answered_project(api: Api, n: int) -> tuple[str, str]:
    """A customer token and a project of n items, each answered once (so resolved)."""
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    created = await api.create_project(customer["token"], tasks_of("s", n), redundancy=1)
    for _ in range(n):
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"label": "x"})
    return customer["token"], created["project"]["id"]


async def _connection(api: Api, token: str, query: str, pid: str, first: int) -> list[Any]:
    """Every page, following endCursor while hasNextPage; the page after the last is empty."""
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        (page,) = (await api.gql(query, {"p": pid, "a": after, "f": first}, token)).values()
        pages.append(page)
        if page["edges"]:
            assert page["pageInfo"]["endCursor"] == page["edges"][-1]["cursor"]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    if pages[-1]["edges"]:
        (rest,) = (
            await api.gql(
                query, {"p": pid, "a": pages[-1]["pageInfo"]["endCursor"], "f": first}, token
            )
        ).values()
        assert rest["edges"] == [] and rest["pageInfo"]["hasNextPage"] is False, rest
    return pages


def _nodes(pages: list[dict[str, Any]]) -> list[Any]:
    return [e["node"] for p in pages for e in p["edges"]]


async def test_connections_end_exactly_on_a_full_last_page(api: Api) -> None:
    token, pid = await _answered_project(api, 4)
    for query in (ITEM_RESULTS, ITEM_CHANGES, PAYLOAD_AUDIT):
        (whole,) = await _connection(api, token, query, pid, MAX_FIRST)
        n = len(whole["edges"])
        assert n == 4, (query, whole)  # 4 results, 4 changes, 4 claims audited
        (exact,) = await _connection(api, token, query, pid, n)
        assert len(exact["edges"]) == n and exact["pageInfo"]["hasNextPage"] is False
        halves = await _connection(api, token, query, pid, n // 2)
        assert [len(p["edges"]) for p in halves] == [n // 2, n // 2]
        assert [p["pageInfo"]["hasNextPage"] for p in halves] == [True, False]
        # The round trip: pages of any size walk the same rows once, in the same order.
        assert _nodes(halves) == _nodes([whole])
        singles = await _connection(api, token, query, pid, 1)
        assert _nodes(singles) == _nodes([whole]) and len(singles) == n


async def test_rest_pages_with_the_same_cursors(api: Api) -> None:
    token, pid = await _answered_project(api, 3)
    (gql,) = await _connection(api, token, ITEM_CHANGES, pid, MAX_FIRST)
    cursors = [e["cursor"] for e in gql["edges"]]
    for path, rows in (
        (f"/v1/projects/{pid}/result-changes", "changes"),
        ("/v1/audit-log", "entries"),
    ):
        seen, after = [], None
        while True:
            query = f"{path}?first=2" + (f"&after={after}" if after else "")
            r = await api.rest("GET", query, token)
            assert r.status_code == 200, r.text
            body = r.json()
            seen += body[rows]
            if not body["page_info"]["has_next_page"]:
                break
            after = body["page_info"]["end_cursor"]
        assert len(seen) == 3, (path, seen)
    # A REST cursor continues in GraphQL and the other way round.
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?first=1", token)
    rest_cursor = r.json()["page_info"]["end_cursor"]
    assert rest_cursor == cursors[0]
    (page,) = (await api.gql(ITEM_CHANGES, {"p": pid, "a": rest_cursor, "f": 5}, token)).values()
    assert [e["cursor"] for e in page["edges"]] == cursors[1:]
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?after={cursors[1]}", token)
    assert [c["item_id"] for c in r.json()["changes"]] == [
        e["node"]["itemId"] for e in gql["edges"][2:]
    ]
    assert r.json()["page_info"] == {"has_next_page": False, "end_cursor": cursors[2]}
    # The results stream resumes after a connection's cursor as after an item id.
    (results,) = await _connection(api, token, ITEM_RESULTS, pid, MAX_FIRST)
    first = results["edges"][0]
    for after in (first["cursor"], first["node"]["itemId"]):
        r = await api.rest("GET", f"/v1/projects/{pid}/results?after={after}", token)
        lines = [line for line in r.text.splitlines() if line]
        assert len(lines) == 2 and first["node"]["itemId"] not in r.text, (after, r.text)


async def test_deprecated_cursors_carry_over_to_the_connections(api: Api) -> None:
    token, pid = await _answered_project(api, 3)
    old = (await api.gql(CHANGES, {"p": pid, "a": None, "f": 1}, token))["resultChanges"]
    assert old["cursor"].isdigit() and old["hasMore"] is True  # the raw number, as before
    (page,) = (await api.gql(ITEM_CHANGES, {"p": pid, "a": old["cursor"], "f": 5}, token)).values()
    (whole,) = await _connection(api, token, ITEM_CHANGES, pid, MAX_FIRST)
    assert _nodes([page]) == _nodes([whole])[1:]
    old = (await api.gql(RESULTS, {"p": pid, "a": None, "f": 1}, token))["results"]
    assert old["cursor"] == old["items"][0]["itemId"]  # the raw item id, as before
    (page,) = (await api.gql(ITEM_RESULTS, {"p": pid, "a": old["cursor"], "f": 5}, token)).values()
    assert len(page["edges"]) == 2 and page["pageInfo"]["hasPreviousPage"] is True


async def test_bad_cursors_and_sizes_are_bad_input_naming_the_argument(api: Api) -> None:
    token, pid = await _answered_project(api, 2)
    # A cursor of another listing is refused, not read as a position in this one.
    projects = await api.gql("{ projects(first: 1) { pageInfo { endCursor } } }", {}, token)
    foreign = projects["projects"]["pageInfo"]["endCursor"]
    assert foreign
    for query in (ITEM_RESULTS, ITEM_CHANGES, PAYLOAD_AUDIT):
        for after in (foreign, "not a cursor", "bm9wZTox"):
            body = await api.gql_raw(query, {"p": pid, "a": after, "f": 10}, token)
            [error] = body["errors"]
            assert error["extensions"]["code"] == "BAD_INPUT", body
            assert error["extensions"]["field"] == "after", body
    for path in (f"/v1/projects/{pid}/result-changes", "/v1/audit-log"):
        r = await api.rest("GET", f"{path}?after={foreign}", token)
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "after", r.text
        for size in ("0", str(MAX_FIRST + 1), "x"):
            r = await api.rest("GET", f"{path}?first={size}", token)
            assert r.status_code == 422, r.text
            assert r.json()["error"]["details"]["field"] == "first", r.text
        r = await api.rest("GET", f"{path}?first=1&limit=1", token)
        assert r.status_code == 422, r.text


LISTINGS = [
    "itemResults(projectId: $p, first: $f) { pageInfo { hasNextPage } }",
    "itemResultChanges(projectId: $p, first: $f) { pageInfo { hasNextPage } }",
    "payloadAudit(projectId: $p, first: $f) { pageInfo { hasNextPage } }",
    "payouts(projectId: $p, first: $f) { pageInfo { hasNextPage } }",
    "assignmentReviews(projectId: $p, first: $f) { pageInfo { hasNextPage } }",
    "projects(first: $f) { pageInfo { hasNextPage } }",
    "experts(first: $f) { pageInfo { hasNextPage } }",
    "customers(first: $f) { pageInfo { hasNextPage } }",
    "adminAudit(first: $f) { pageInfo { hasNextPage } }",
    "project(id: $p) { remainingHistory(first: $f) { pageInfo { hasNextPage } } }",
    "project(id: $p) { alertHistory(first: $f) { pageInfo { hasNextPage } } }",
    "results(projectId: $p, first: $f) { hasMore }",
    "resultChanges(projectId: $p, first: $f) { hasMore }",
]


ALERTS = """query($p: ID!, $a: String, $f: Int!) { project(id: $p) {
  alertHistory(after: $a, first: $f) {
    edges { cursor node { message } } pageInfo { hasNextPage endCursor } } } }"""


async def test_alert_history_pages_newest_first(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("s", 1)))["project"]["id"]
    # Alerts come from the deadline job's flips; four of them written as it writes them.
    for i in range(4):
        await db.execute(
            "INSERT INTO project_alerts (project_id, kind, message, remaining)"
            " VALUES ($1, 'at_risk', $2, 1)",
            pid,
            f"alert {i}",
        )

    async def pages(first: int) -> list[dict[str, Any]]:
        got, after = [], None
        while True:
            v = {"p": pid, "a": after, "f": first}
            page = (await api.gql(ALERTS, v, customer["token"]))["project"]["alertHistory"]
            got.append(page)
            if not page["pageInfo"]["hasNextPage"]:
                return got
            after = page["pageInfo"]["endCursor"]

    newest_first = [f"alert {i}" for i in (3, 2, 1, 0)]
    for first, sizes in ((4, [4]), (2, [2, 2]), (3, [3, 1]), (1, [1, 1, 1, 1])):
        got = await pages(first)
        assert [len(p["edges"]) for p in got] == sizes
        assert [e["node"]["message"] for p in got for e in p["edges"]] == newest_first
    body = await api.gql_raw(ALERTS, {"p": pid, "a": "bm9wZTox", "f": 2}, customer["token"])
    assert body["errors"][0]["extensions"]["field"] == "after", body


async def test_one_page_cap_for_every_listing(api: Api) -> None:
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("s", 1)))["project"]["id"]
    for listing in LISTINGS:
        params = "$p: ID!, $f: Int!" if "$p" in listing else "$f: Int!"
        query = f"query({params}) {{ {listing} }}"
        for first, ok in ((1, True), (MAX_FIRST, True), (MAX_FIRST + 1, False), (0, False)):
            body = await api.gql_raw(query, {"p": pid, "f": first}, ADMIN_TOKEN)
            if ok:
                assert "errors" not in body, (listing, first, body)
            else:
                [error] = body["errors"]
                assert error["extensions"]["code"] == "BAD_INPUT", (listing, body)
                assert error["extensions"]["field"] == "first", (listing, body)


async def _pages(api: Api, token: str, query: str, key: str, pid: str, first: int) -> list[Any]:
    """Every page of a deprecated listing, following hasMore; the page after the last is empty."""
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        page = (await api.gql(query, {"p": pid, "a": after, "f": first}, token))[key]
        pages.append(page)
        after = page["cursor"]
        if not page["hasMore"]:
            break
    rest = (await api.gql(query, {"p": pid, "a": after, "f": first}, token))[key]
    assert not rest["hasMore"] and not (rest.get("items") or rest.get("changes")), rest
    return pages


async def test_deprecated_pages_keep_their_shape(api: Api) -> None:
    token, pid = await _answered_project(api, 4)
    (whole,) = await _pages(api, token, RESULTS, "results", pid, 4)
    assert len(whole["items"]) == 4 and whole["hasMore"] is False
    halves = await _pages(api, token, RESULTS, "results", pid, 2)
    assert [len(p["items"]) for p in halves] == [2, 2]
    assert [p["hasMore"] for p in halves] == [True, False]
    ids = [i["itemId"] for p in halves for i in p["items"]]
    assert ids == [i["itemId"] for i in whole["items"]]

    changes = sum(
        len(p["changes"]) for p in await _pages(api, token, CHANGES, "resultChanges", pid, 100)
    )
    assert changes >= 4
    (exact,) = await _pages(api, token, CHANGES, "resultChanges", pid, changes)
    assert len(exact["changes"]) == changes and exact["hasMore"] is False
    assert exact["cursor"] == exact["changes"][-1]["cursor"]
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?limit={changes}", token)
    assert r.status_code == 200 and r.json()["has_more"] is False
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?limit={changes - 1}", token)
    assert r.json()["has_more"] is True and len(r.json()["changes"]) == changes - 1
    assert r.json()["cursor"] == r.json()["changes"][-1]["cursor"]
