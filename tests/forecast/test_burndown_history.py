"""`project { remainingHistory }`: the burn-down's data (issue 13), rebuilt from when each
slot was created and finished, on the database clock the test moves (no sleeping)."""

from __future__ import annotations

import base64
from typing import Any

import asyncpg
import pytest

from ..clock import DbClock
from ..helpers import Api, GraphQLError, tasks_of

HISTORY = """query($p: ID!, $first: Int!, $after: String, $b: Int) { project(id: $p) {
  completedAt
  remainingHistory(first: $first, after: $after, bucketSeconds: $b) {
    bucketSeconds
    edges { cursor node { at remaining added finished } }
    pageInfo { hasNextPage endCursor }
  } } }"""


async def history(api: Api, token: str, pid: str, first: int, **kw: Any) -> dict[str, Any]:
    data = await api.gql(
        HISTORY, {"p": pid, "first": first, "after": kw.get("after"), "b": kw.get("b")}, token
    )
    return data["project"]


async def test_remaining_work_over_time_in_pages(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    # Start 10 s into a 5-minute bucket, so each step below lands in a known bucket.
    now = await db.fetchval("SELECT extract(epoch FROM taskroute_now())")
    await clock.advance(300 - float(now) % 300 + 10)
    pid = (await api.create_project(customer["token"], tasks_of("grading", 4)))["project"]["id"]
    for _ in range(2):
        await clock.advance(300)
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})
    # ... that is two submits 5 and 10 minutes in; then two more 20 minutes in.
    await clock.advance(600)
    for _ in range(2):
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})

    whole = await history(api, customer["token"], pid, 50, b=300)
    h = whole["remainingHistory"]
    nodes = [e["node"] for e in h["edges"]]
    assert h["bucketSeconds"] == 300 and not h["pageInfo"]["hasNextPage"]
    assert [n["remaining"] for n in nodes] == [4, 3, 2, 2, 0]
    assert [n["added"] for n in nodes] == [4, 0, 0, 0, 0]
    assert [n["finished"] for n in nodes] == [0, 1, 1, 0, 2]
    # The last point is the moment the project completed; the others end their bucket.
    assert nodes[-1]["at"] == whole["completedAt"]
    assert all(n["at"].endswith(":00+00:00") or n["at"].endswith(":00Z") for n in nodes[:-1])

    # 1-minute buckets in pages of two: every minute once, in order.
    paged: list[dict[str, Any]] = []
    after = None
    while True:
        page = (await history(api, customer["token"], pid, 2, after=after, b=60))[
            "remainingHistory"
        ]
        paged += [e["node"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert paged[0]["remaining"] == 4 and paged[-1]["remaining"] == 0
    assert len(paged) == 21  # 20 minutes and a bit, in 1-minute buckets (2 a page)
    assert [p["at"] for p in paged] == sorted(p["at"] for p in paged)

    # The default fits the whole history into `first` points.
    auto = (await history(api, customer["token"], pid, 120))["remainingHistory"]
    assert auto["bucketSeconds"] == 60 and len(auto["edges"]) == 21


@pytest.mark.parametrize(
    ("first", "after", "b", "field"),
    [
        (0, None, None, "first"),
        (1001, None, None, "first"),
        (10, None, 59, "bucketSeconds"),
        (10, "not-a-cursor", None, "after"),
        # well-formed, but not a width this listing makes: no date past year 9999 follows
        (10, base64.urlsafe_b64encode(b"remaining:1000000000000000000|5").decode(), None, "after"),
        (10, base64.urlsafe_b64encode(b"remaining:0|5").decode(), None, "after"),
    ],
)
async def test_bad_history_arguments_are_bad_input(
    api: Api, first: int, after: str | None, b: int | None, field: str
) -> None:
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
    with pytest.raises(GraphQLError) as err:
        await history(api, customer["token"], pid, first, after=after, b=b)
    assert err.value.code == "BAD_INPUT"
    assert err.value.errors[0]["extensions"]["field"] == field


async def test_a_cursor_of_another_width_is_refused(api: Api) -> None:
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
    page = (await history(api, customer["token"], pid, 1, b=60))["remainingHistory"]
    cursor = page["edges"][0]["cursor"]
    with pytest.raises(GraphQLError) as err:
        await history(api, customer["token"], pid, 1, after=cursor, b=300)
    assert err.value.code == "BAD_INPUT"
