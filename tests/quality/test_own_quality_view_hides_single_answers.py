"""What an expert sees of their own quality says nothing about one task: the gold figures and
quality of `me { expert { skills } }` count only gold answers of past periods (on the database
clock), in bulk, so neither a gold submit nor a real one moves them; the admin sees the exact
figures at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest_asyncio

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, serving, settings_for, tasks_of

PERIOD = 86400
FIGURES = "skill status quality qualitySource goldSeen goldCorrect"
OWN = f"{{ me {{ expert {{ skills {{ {FIGURES} }} }} }} }}"
ADMIN = f"query($e: ID!) {{ expert(id: $e) {{ skills {{ {FIGURES} }} }} }}"


@pytest_asyncio.fixture
async def min_two(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(
        database_url, tmp_path, expert_quality_period=PERIOD, expert_quality_min_gold=2
    )
    async with serving(settings) as api:
        yield api


async def own_view(api: Api, token: str) -> list[dict[str, Any]]:
    skills: list[dict[str, Any]] = (await api.gql(OWN, token=token))["me"]["expert"]["skills"]
    return skills


async def admin_view(api: Api, expert_id: str) -> list[dict[str, Any]]:
    data = await api.gql(ADMIN, {"e": expert_id}, ADMIN_TOKEN)
    skills: list[dict[str, Any]] = data["expert"]["skills"]
    return skills


async def test_own_view_moves_only_in_bulk_after_the_period_ends(
    min_two: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    api = min_two
    # Start just after a period boundary: the whole test runs inside one period.
    into = await db.fetchval(
        "SELECT mod(extract(epoch FROM taskroute_now()), $1::numeric)::float8", PERIOD
    )
    await clock.advance(PERIOD - into + 1)
    customer = await api.create_customer()
    project = (await api.create_project(customer["token"], tasks_of("review", 30)))["project"]
    gold = [{"skill": "review", "payload": {"g": i}, "gold": {"ok": 1}} for i in range(10)]
    await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addGoldItems(projectId: $p, tasks: $t) }",
        {"p": project["id"], "t": gold},
        customer["token"],
    )
    await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input:"
        " {goldRatio: 0.5, explorationGoldRatio: 0.5}) { goldRatio } }",
        {"p": project["id"]},
        ADMIN_TOKEN,
    )
    expert = await api.create_expert([{"skill": "review", "quality": 0.8}])
    before = await own_view(api, expert["token"])
    assert before == [
        {"skill": "review", "status": "active", "quality": 0.800000011920929,
         "qualitySource": "admin", "goldSeen": 0, "goldCorrect": 0}
    ]  # fmt: skip
    submitted = {"gold": 0, "normal": 0}
    while submitted["gold"] < 2 or submitted["normal"] < 1:
        claim = await api.claim(expert["token"])
        assert claim is not None
        kind = await db.fetchval(
            "SELECT kind FROM tasks WHERE id = $1::text::uuid", claim["task"]["id"]
        )
        exact_before = await admin_view(api, expert["id"])
        # gold answered right and wrong in turn: the exact figures move both ways
        await api.submit(expert["token"], claim["assignmentId"], {"ok": submitted["gold"] % 2})
        submitted[kind] += 1
        # the expert sees nothing move, after either kind
        assert await own_view(api, expert["token"]) == before, kind
        exact = await admin_view(api, expert["id"])
        if kind == "gold":
            assert exact[0]["goldSeen"] == exact_before[0]["goldSeen"] + 1
            assert exact[0]["qualitySource"] == "gold"
        else:
            assert exact == exact_before
    assert submitted["gold"] == exact[0]["goldSeen"]

    # Once the period is over, the expert sees the same figures as the admin, all at once.
    await clock.advance(PERIOD)
    after = await own_view(api, expert["token"])
    assert after == await admin_view(api, expert["id"])
    assert after[0]["goldSeen"] == submitted["gold"] and after[0]["qualitySource"] == "gold"


async def test_own_view_waits_for_the_least_count(
    min_two: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    """One old-enough gold answer is not shown: a lone result would name its task."""
    api = min_two
    customer = await api.create_customer()
    project = (await api.create_project(customer["token"], tasks_of("review", 5)))["project"]
    await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addGoldItems(projectId: $p, tasks: $t) }",
        {"p": project["id"], "t": [{"skill": "review", "payload": {}, "gold": {"ok": 1}}]},
        customer["token"],
    )
    await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input:"
        " {goldRatio: 1, explorationGoldRatio: 1}) { goldRatio } }",
        {"p": project["id"]},
        ADMIN_TOKEN,
    )
    expert = await api.create_expert(["review"])
    before = await own_view(api, expert["token"])
    claim = await api.claim(expert["token"])
    assert claim is not None
    assert (
        await db.fetchval("SELECT kind FROM tasks WHERE id = $1::text::uuid", claim["task"]["id"])
        == "gold"
    )
    await api.submit(expert["token"], claim["assignmentId"], {"ok": 0})
    await clock.advance(2 * PERIOD)
    assert (await admin_view(api, expert["id"]))[0]["goldSeen"] == 1
    assert await own_view(api, expert["token"]) == before
