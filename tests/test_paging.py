"""Pages say whether another page follows, also when the last page is exactly full."""

from __future__ import annotations

from typing import Any

from .helpers import Api, tasks_of

RESULTS = (
    "query($p: ID!, $a: String, $f: Int!) { results(projectId: $p, after: $a, first: $f)"
    " { cursor hasMore items { itemId } } }"
)
CHANGES = (
    "query($p: ID!, $a: String, $f: Int!) { resultChanges(projectId: $p, after: $a, first: $f)"
    " { cursor hasMore changes { cursor } } }"
)


async def _pages(api: Api, token: str, query: str, key: str, pid: str, first: int) -> list[Any]:
    """Every page, following hasMore; the page after the last one is empty."""
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


async def test_has_more_is_false_on_an_exactly_full_last_page(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    created = await api.create_project(customer["token"], tasks_of("s", 4), redundancy=1)
    pid = created["project"]["id"]
    for _ in range(4):
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"label": "x"})

    token = customer["token"]
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
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?limit={changes}", token)
    assert r.status_code == 200 and r.json()["has_more"] is False
    r = await api.rest("GET", f"/v1/projects/{pid}/result-changes?limit={changes - 1}", token)
    assert r.json()["has_more"] is True and len(r.json()["changes"]) == changes - 1
