"""An expert gives a claim back: skip, can't answer, bad item. Through the public API,
checked against the database."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from taskroute.resolvers.jobs.sweeper import sweep_once

from ..clock import DbClock
from ..helpers import Api, GraphQLError, serving, settings_for, tasks_of, wait_for

RELEASE = (
    "mutation($a: ID!, $r: ReleaseReason!) { releaseAssignment(assignmentId: $a, reason: $r)"
    " { assignmentId reason releasesLeft resetsAt } }"
)
RELEASES_LEFT = "{ me { expert { releasesLeft releasesResetAt } } }"


async def release(api: Api, token: str, assignment_id: str, reason: str) -> dict[str, Any]:
    data = await api.gql(RELEASE, {"a": assignment_id, "r": reason}, token)
    return data["releaseAssignment"]


async def test_a_release_reopens_the_task_without_an_attempt_and_never_offers_it_again(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    alice = await api.create_expert(["grading"], "alice")
    bob = await api.create_expert(["grading"], "bob")
    await api.create_project(customer["token"], tasks_of("grading", 1))
    claim = await api.claim(alice["token"])
    assert claim is not None
    r = await release(api, alice["token"], claim["assignmentId"], "SKIP")
    assert r["reason"] == "SKIP"
    task = await db.fetchrow("SELECT status, attempts, assignment_id FROM tasks")
    assert dict(task) == {"status": "open", "attempts": 0, "assignment_id": None}
    assert await db.fetchval("SELECT status FROM assignments") == "released"
    assert await api.claim(alice["token"]) is None  # never offered this item again
    again = await api.claim(bob["token"])
    assert again is not None and again["task"]["id"] == claim["task"]["id"]
    # a released claim cannot be submitted or released again
    try:
        await api.submit(alice["token"], claim["assignmentId"], {"x": 1})
        raise AssertionError("submitted a released claim")
    except GraphQLError as exc:
        assert exc.code == "LEASE_EXPIRED"


async def test_rest_release_and_bad_reason(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 2))
    claim = await api.claim(expert["token"])
    assert claim is not None
    path = f"/v1/assignments/{claim['assignmentId']}/release"
    bad = await api.rest("POST", path, expert["token"], json={"reason": "BORED"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "BAD_INPUT"
    assert await db.fetchval("SELECT status FROM assignments") == "active"  # nothing lost
    ok = await api.rest("POST", path, expert["token"], json={"reason": "CANNOT_ANSWER"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["reason"] == "CANNOT_ANSWER"
    assert await db.fetchval("SELECT reason FROM item_releases") == "CANNOT_ANSWER"


async def test_bad_item_from_k_experts_flags_the_item_for_the_customer(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], f"e{i}") for i in range(3)]
    created = await api.create_project(
        customer["token"], tasks_of("grading", 1), redundancy=3, flagAfterBadItemReleases=2
    )
    pid = created["project"]["id"]
    for e in experts[:2]:
        claim = await api.claim(e["token"])
        assert claim is not None
        await release(api, e["token"], claim["assignmentId"], "BAD_ITEM")
    assert await db.fetchval("SELECT flagged_at IS NOT NULL FROM items")
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'open'") == 0
    assert await api.claim(experts[2]["token"]) is None
    data = await api.gql(
        "query($p: ID!) { project(id: $p) { flaggedItems { itemId reasons } } }",
        {"p": pid},
        customer["token"],
    )
    flagged = data["project"]["flaggedItems"]
    assert len(flagged) == 1 and flagged[0]["reasons"] == {"BAD_ITEM": 2}


async def test_releases_are_bounded_per_hour_and_the_error_says_when_they_reset(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    async with serving(settings_for(database_url, tmp_path, releases_per_hour=2)) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        await api.create_project(customer["token"], tasks_of("grading", 4))
        lefts = []
        for _ in range(2):
            claim = await api.claim(expert["token"])
            assert claim is not None
            lefts.append(
                (await release(api, expert["token"], claim["assignmentId"], "SKIP"))["releasesLeft"]
            )
        assert lefts == [1, 0]
        me = (await api.gql(RELEASES_LEFT, token=expert["token"]))["me"]["expert"]
        assert me["releasesLeft"] == 0 and me["releasesResetAt"] is not None
        claim = await api.claim(expert["token"])
        assert claim is not None
        r = await api.rest(
            "POST", f"/v1/assignments/{claim['assignmentId']}/release", expert["token"],
            json={"reason": "SKIP"},
        )  # fmt: skip
        assert r.status_code == 429
        err = r.json()["error"]
        assert err["code"] == "TOO_MANY_RELEASES"
        assert err["details"]["resetsAt"] in err["message"]
        assert await db.fetchval("SELECT status FROM assignments WHERE id = $1::uuid",
                                 claim["assignmentId"]) == "active"  # fmt: skip
        await clock.advance(3601)
        await api.claim(expert["token"])  # the lease ran out meanwhile: claim again
        me = (await api.gql(RELEASES_LEFT, token=expert["token"]))["me"]["expert"]
        assert me["releasesLeft"] == 2


@pytest.mark.parametrize("lease_over", [False, True])
async def test_a_release_racing_a_submit_and_the_sweeper_has_one_outcome(
    api: Api, db: asyncpg.Connection, clock: DbClock, jobs_db: Any, lease_over: bool
) -> None:
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], f"e{i}") for i in range(12)]
    await api.create_project(customer["token"], tasks_of("grading", 12), payCents=5)
    claims = []
    for e in experts:
        claim = await api.claim(e["token"])
        assert claim is not None
        claims.append((e, claim))

    async def both(e: dict[str, str], c: dict[str, Any]) -> None:
        async def rel() -> None:
            try:
                await release(api, e["token"], c["assignmentId"], "SKIP")
            except GraphQLError as exc:
                assert exc.code in ("ALREADY_SUBMITTED", "LEASE_EXPIRED"), exc.errors

        async def sub() -> None:
            try:
                await api.submit(e["token"], c["assignmentId"], {"ok": True})
            except GraphQLError as exc:
                assert exc.code == "LEASE_EXPIRED", exc.errors

        await asyncio.gather(rel(), sub())

    if lease_over:  # the sweeper may take them: then neither a release nor a submit does
        await clock.advance(3600)

    async def sweep() -> None:
        for _ in range(3):
            await sweep_once(jobs_db)

    await asyncio.gather(*(both(e, c) for e, c in claims), sweep())
    rows = await db.fetch(
        "SELECT a.status, t.status AS task_status, t.attempts,"
        " (SELECT count(*) FROM payouts p WHERE p.assignment_id = a.id) AS paid,"
        " (SELECT count(*) FROM item_releases r WHERE r.assignment_id = a.id) AS released"
        " FROM assignments a JOIN tasks t ON t.id = a.task_id"
    )
    assert len(rows) == 12
    for r in rows:
        if lease_over:  # one expiry, counted once
            assert (r["status"], r["task_status"], r["attempts"], r["paid"], r["released"]) == (
                "expired", "open", 1, 0, 0)  # fmt: skip
            continue
        assert r["attempts"] == 0  # neither a release nor a submit is a failed attempt
        if r["status"] == "submitted":
            assert (r["task_status"], r["paid"], r["released"]) == ("done", 1, 0)
        else:
            assert r["status"] == "released", dict(r)
            assert (r["task_status"], r["paid"], r["released"]) == ("open", 0, 1)


async def test_claim_naming_a_skill_not_held_is_bad_input(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    try:
        await api.claim(expert["token"], ["grading", "translation"])
        raise AssertionError("claimed with an unknown skill")
    except GraphQLError as exc:
        assert exc.code == "BAD_INPUT" and "translation" in exc.errors[0]["message"]
    r = await api.rest("POST", "/v1/tasks/next", expert["token"], json={"skills": ["poetry"]})
    assert r.status_code == 422 and "poetry" in r.json()["error"]["message"]
    assert await api.claim(expert["token"], ["grading"]) is None  # held: "no work"


async def test_a_repeated_submit_with_another_answer_says_the_first_stands(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1))
    claim = await api.claim(expert["token"])
    assert claim is not None
    q = (
        "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) {"
        " id duplicate answerDiffers } }"
    )
    first = await api.gql(q, {"a": claim["assignmentId"], "x": {"v": 1}}, expert["token"])
    same = await api.gql(q, {"a": claim["assignmentId"], "x": {"v": 1}}, expert["token"])
    other = await api.gql(q, {"a": claim["assignmentId"], "x": {"v": 2}}, expert["token"])
    assert first["submit"]["duplicate"] is False
    assert same["submit"] == {"id": first["submit"]["id"], "duplicate": True,
                              "answerDiffers": False}  # fmt: skip
    assert other["submit"] == {"id": first["submit"]["id"], "duplicate": True,
                               "answerDiffers": True}  # fmt: skip
    r = await api.rest(
        "POST", f"/v1/assignments/{claim['assignmentId']}/submit", expert["token"],
        json={"answer": {"v": 3}},
    )  # fmt: skip
    assert r.json()["answer_differs"] is True and r.json()["duplicate"] is True
    assert await db.fetchval("SELECT answer FROM assignments") == '{"v": 1}'


@pytest.mark.parametrize("first", ["sweeper", "claim"])
async def test_a_flagged_items_claimed_slot_never_returns_to_the_pool(
    api: Api, db: asyncpg.Connection, clock: DbClock, jobs_db: Any, first: str
) -> None:
    """The item is flagged while a third expert holds one of its slots; that lease then runs
    out. Neither the sweeper nor another expert's claim (which takes over expired leases) may
    offer the slot again: it is canceled, like the item's open slots were."""
    customer = await api.create_customer()
    experts = [await api.create_expert(["grading"], f"e{i}") for i in range(4)]
    await api.create_project(
        customer["token"], tasks_of("grading", 1), redundancy=3, flagAfterBadItemReleases=2
    )
    claims = [await api.claim(e["token"]) for e in experts[:3]]
    assert all(c is not None for c in claims)
    for e, c in zip(experts[:2], claims[:2], strict=True):
        assert c is not None
        await release(api, e["token"], c["assignmentId"], "BAD_ITEM")
    assert await db.fetchval("SELECT flagged_at IS NOT NULL FROM items")
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'claimed'") == 1

    async def swept() -> dict[str, int] | None:
        # The server's own sweeper may hold the row at that moment (a pass skips locked rows):
        # sweep until the slot has left 'claimed', then look at what it became.
        await sweep_once(jobs_db)
        rows = await db.fetch("SELECT status, count(*) AS n FROM tasks GROUP BY status")
        counts = {r["status"]: r["n"] for r in rows}
        return None if "claimed" in counts else counts

    await clock.advance(3600)  # the third holder's lease is over
    if first == "sweeper":
        counts = await wait_for(swept, "the expired slot swept")
        assert await api.claim(experts[3]["token"]) is None
    else:
        assert await api.claim(experts[3]["token"]) is None
        counts = await wait_for(swept, "the expired slot swept")
    assert counts == {"canceled": 3}
    assert await api.claim(experts[3]["token"]) is None
