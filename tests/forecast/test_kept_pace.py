"""Each expert's kept pace (expert_pace, kept by functions/pace.sql, fast path and merge) is their
newest 40 submissions, newest first, whichever way a submission arrives: submits through the
API past the 40 kept, a restamp of a kept one, submits after that restamp, another expert's
submits in between. The forecast reads its pace from these rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from ..helpers import Api, tasks_of

KEPT = 40


async def kept(db: asyncpg.Connection, expert_id: str) -> list[tuple[Any, ...]]:
    row = await db.fetchrow(
        "SELECT assignment_ids, skills, claim_us, submitted_us FROM expert_pace"
        " WHERE expert_id = $1",
        expert_id,
    )
    assert row is not None
    return list(zip(*row.values(), strict=True))


def us(t: timedelta) -> int:
    return t // timedelta(microseconds=1)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def newest(db: asyncpg.Connection, expert_id: str) -> list[tuple[Any, ...]]:
    """The newest 40, times in microseconds: from the claim to the submit,
    and the submit's since 1970."""
    rows = await db.fetch(
        "SELECT a.id, t.skill, a.claimed_at, a.submitted_at FROM assignments a"
        " JOIN tasks t ON t.id = a.task_id"
        " WHERE a.expert_id = $1 AND a.status = 'submitted'"
        " ORDER BY a.submitted_at DESC LIMIT $2",
        expert_id,
        KEPT,
    )
    return [
        (
            r["id"],
            r["skill"],
            us(r["submitted_at"] - r["claimed_at"]),
            us(r["submitted_at"] - EPOCH),
        )
        for r in rows
    ]


async def cycles(api: Api, token: str, n: int, skills: tuple[str, ...] = ("grading",)) -> None:
    """n claim+submit cycles, the claims naming `skills` in turn (which skill an unscoped
    claim picks depends on the routing job's scarcity flags: not this test's subject)."""
    for i in range(n):
        claim = await api.claim(token, [skills[i % len(skills)]])
        assert claim is not None
        await api.submit(token, claim["assignmentId"], {"label": "ok"})


async def test_kept_pace_is_the_newest_40_submissions(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    await api.create_project(customer, tasks_of("grading", 40) + tasks_of("typing", 40))
    ada = await api.create_expert(["grading", "typing"], name="ada")
    bob = await api.create_expert(["grading"], name="bob")

    both = ("grading", "typing")
    await cycles(api, ada["token"], 3, both)
    await cycles(api, bob["token"], 2)
    assert await kept(db, ada["id"]) == await newest(db, ada["id"])
    assert len(await kept(db, ada["id"])) == 3

    # Past 40: the oldest fall out, newest first; both skills are kept with their submissions.
    await cycles(api, ada["token"], 40, both)
    await cycles(api, bob["token"], 1)
    ada_kept = await kept(db, ada["id"])
    assert len(ada_kept) == KEPT and ada_kept == await newest(db, ada["id"])
    assert {k[1] for k in ada_kept} == {"grading", "typing"}
    assert await kept(db, bob["id"]) == await newest(db, bob["id"])

    # A restamp moves a kept submission to the front (the forecast bench stamps simulated
    # times this way); the submits after it are older than that newest one.
    oldest_kept = ada_kept[-1][0]
    await db.execute(
        "UPDATE assignments SET submitted_at = submitted_at + interval '1 hour' WHERE id = $1",
        oldest_kept,
    )
    after_restamp = await kept(db, ada["id"])
    assert after_restamp[0][0] == oldest_kept
    assert after_restamp == await newest(db, ada["id"])
    await cycles(api, ada["token"], 2, both)
    assert await kept(db, ada["id"]) == await newest(db, ada["id"])
    assert (await kept(db, ada["id"]))[0][0] == oldest_kept
    assert await kept(db, bob["id"]) == await newest(db, bob["id"])
