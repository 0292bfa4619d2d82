"""Per-project caps and guards: at most N items per expert, answers faster than a minimum."""

from __future__ import annotations

import asyncio

import asyncpg

from ..clock import DbClock
from ..helpers import Api, GraphQLError, tasks_of


async def test_no_expert_answers_more_than_the_cap_even_claiming_concurrently(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    other = await api.create_expert(["grading"], "other")
    await api.create_project(customer["token"], tasks_of("grading", 8), maxItemsPerExpert=3)

    async def worker() -> None:
        for _ in range(6):
            claim = await api.claim(expert["token"])
            if claim is None:
                return
            try:
                await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
            except GraphQLError as exc:  # another worker of the same expert submitted it
                assert exc.code in ("ALREADY_SUBMITTED",), exc.errors

    await asyncio.gather(*(worker() for _ in range(4)))
    done = await db.fetchval(
        "SELECT count(*) FROM assignments WHERE expert_id = $1::uuid AND status = 'submitted'",
        expert["id"],
    )
    assert done == 3
    assert await api.claim(expert["token"]) is None
    assert await api.claim(other["token"]) is not None  # the cap is per expert


async def test_a_too_fast_answer_is_flagged_and_under_exclude_not_paid(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(
        customer["token"], tasks_of("grading", 2), payCents=10,
        minSecondsPerTask=30, tooFastPolicy="exclude",
    )  # fmt: skip
    fast = await api.claim(expert["token"])
    assert fast is not None
    receipt = await api.submit(expert["token"], fast["assignmentId"], {"ok": True})
    assert receipt["payCents"] == 10
    slow = await api.claim(expert["token"])
    assert slow is not None
    await clock.advance(31)
    await api.submit(expert["token"], slow["assignmentId"], {"ok": True})
    rows = {
        str(r["id"]): r
        for r in await db.fetch("SELECT id, too_fast, review_status FROM assignments")
    }
    assert rows[fast["assignmentId"]]["too_fast"] is True
    assert rows[fast["assignmentId"]]["review_status"] == "submitted"  # waits for review
    assert rows[slow["assignmentId"]]["too_fast"] is False
    paid = await db.fetch("SELECT assignment_id FROM payouts")
    assert [str(p["assignment_id"]) for p in paid] == [slow["assignmentId"]]
    # the customer sees the flag in the review listing
    data = await api.gql(
        "query($p: ID!) { assignmentReviews(projectId: $p, first: 10) {"
        " edges { node { assignmentId tooFast } } } }",
        {"p": created["project"]["id"]},
        customer["token"],
    )
    flags = {e["node"]["assignmentId"]: e["node"]["tooFast"]
             for e in data["assignmentReviews"]["edges"]}  # fmt: skip
    assert flags == {fast["assignmentId"]: True, slow["assignmentId"]: False}
