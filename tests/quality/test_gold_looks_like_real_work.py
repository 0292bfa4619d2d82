"""An expert cannot tell a gold serving from the real work it is mixed into.

Every field a claim and a heartbeat show is compared between gold and real servings in the
same project: the project, skill and priority, how the payload travels (inline, or by URL
above TASKROUTE_INLINE_PAYLOAD_BYTES), the lease length, and hasHighPriorityTasks (which
compares base priorities, never fairness boosts). Each field must take the same values on
both kinds. Which serving was gold is read from the database afterwards.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest_asyncio

from ..helpers import (
    ADMIN_TOKEN,
    CLAIM_TASK_FIELDS,
    Api,
    claim_mutation,
    serving,
    settings_for,
)

CLAIM = claim_mutation(CLAIM_TASK_FIELDS + " priorAnswers")
HEARTBEAT = "mutation($a: ID!) { heartbeat(assignmentId: $a) { leaseUntil hasHighPriorityTasks } }"
INLINE_MAX = 200
BIG = "x" * 400  # travels by URL
LEASE = 600


@pytest_asyncio.fixture
async def small_inline(database_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    settings = settings_for(database_url, tmp_path, inline_payload_bytes=INLINE_MAX)
    async with serving(settings) as api:
        yield api


def _observed(claim: dict[str, Any], beat: dict[str, Any]) -> dict[str, Any]:
    task = claim["task"]
    lease = datetime.fromisoformat(beat["leaseUntil"]) - datetime.fromisoformat(claim["leaseUntil"])
    return {
        "projectId": task["projectId"],
        "skill": task["skill"],
        "priority": task["priority"],
        "payload inline": task["payload"] is not None,
        "payload by URL": task["payloadUrl"] is not None,
        "priorAnswers": task["priorAnswers"],
        # the heartbeat extends the lease to a full lease again: same length on both kinds
        "lease seconds": round(
            (
                datetime.fromisoformat(beat["leaseUntil"]) - datetime.now().astimezone()
            ).total_seconds(),
            -1,
        ),
        "lease moved forward": lease.total_seconds() >= 0,
        "hasHighPriorityTasks": beat["hasHighPriorityTasks"],
    }


async def test_gold_and_real_servings_look_the_same(
    small_inline: Api, db: asyncpg.Connection
) -> None:
    api = small_inline
    customer = await api.create_customer()
    experts = [await api.create_expert(["review"], name=f"e{i}") for i in range(6)]
    real = [{"skill": "review", "payload": {"doc": BIG, "n": i}, "priority": 3} for i in range(40)]
    created = await api.create_project(
        customer["token"], real, priorityClass="HIGH", leaseSeconds=LEASE, name="high"
    )
    project = created["project"]["id"]
    # Lower-priority work the experts could also take: never "higher priority" than either.
    await api.create_project(
        customer["token"],
        [{"skill": "review", "payload": {"doc": "short"}} for _ in range(5)],
        name="normal",
    )
    gold = [
        {"skill": "review", "payload": {"doc": BIG, "g": i}, "gold": {"ok": 1}} for i in range(20)
    ]
    await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addGoldItems(projectId: $p, tasks: $t) }",
        {"p": project, "t": gold},
        customer["token"],
    )
    await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input:"
        " {goldRatio: 0.5, explorationGoldRatio: 0.5}) { goldRatio } }",
        {"p": project},
        ADMIN_TOKEN,
    )
    # A fairness boost on some real tasks of the same class must not read as higher priority.
    await db.execute(
        "UPDATE tasks SET eff_priority = eff_priority + routing_fair_boost()"
        " WHERE id IN (SELECT id FROM tasks WHERE project_id = $1::text::uuid AND status = 'open'"
        " ORDER BY seq DESC LIMIT 10)",
        project,
    )

    seen: dict[str, dict[str, set[Any]]] = {"gold": defaultdict(set), "normal": defaultdict(set)}
    for _ in range(4):
        for e in experts:
            claim = (await api.gql(CLAIM, {}, e["token"]))["claimNextTask"]
            assert claim is not None
            beat = (await api.gql(HEARTBEAT, {"a": claim["assignmentId"]}, e["token"]))["heartbeat"]
            kind = await db.fetchval(
                "SELECT kind FROM tasks WHERE id = $1::text::uuid", claim["task"]["id"]
            )
            # Gold is compared with the real work of its own project. The routing job may lend
            # the other project's tasks a fairness boost once its class has gone without claims
            # for a window (how soon depends on this machine's speed); those servings differ
            # from both kinds by design, so they are not compared.
            if claim["task"]["projectId"] == project:
                for field, value in _observed(claim, beat).items():
                    seen[kind][field].add(repr(value))
            await api.submit(e["token"], claim["assignmentId"], {"ok": 1})

    assert seen["gold"] and seen["normal"], "the run must serve both kinds"
    differ = {
        field: (seen["gold"][field], seen["normal"][field])
        for field in seen["normal"]
        if seen["gold"][field] != seen["normal"][field]
    }
    assert not differ, f"gold can be told apart by: {differ}"
