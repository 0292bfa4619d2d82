"""Constructing throughput histories directly in the test database (issue 7 tests).

A history is made of real rows: tasks of a helper project marked done, each with a submitted
assignment at a chosen time, so the forecast query sees exactly what production would.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from .helpers import Api, tasks_of

FORECAST_FIELDS = """
  remaining eta etaEarly etaLate onTrack atRisk throughputPerHour deadline evaluatedAt reasons
  bySkill { paceSamples reason skill total done remaining inFlight activeExperts expertEquivalents
            tasksPerExpertHour throughputPerHour eta etaEarly etaLate onTrack
            extraExpertsNeeded }
"""


async def db_now(db: asyncpg.Connection) -> datetime:
    return await db.fetchval("SELECT now()")


async def history_project(api: Api, customer_token: str, skill: str, n: int) -> str:
    """A project (no deadline) whose n tasks become the submitted history."""
    created = await api.create_project(customer_token, tasks_of(skill, n), name="history")
    return created["project"]["id"]


async def add_history(
    db: asyncpg.Connection,
    project_id: str,
    expert_id: str,
    skill: str,
    minutes_ago: list[float],
    on_task: float = 10.0,
) -> None:
    """Mark open tasks of `project_id` done, submitted by the expert at the given times, each
    claimed `on_task` minutes before its submission."""
    async with db.transaction():
        for ago in minutes_ago:
            task = await db.fetchrow(
                "SELECT id, item_id FROM tasks WHERE project_id = $1 AND skill = $2"
                " AND status = 'open' ORDER BY seq LIMIT 1 FOR UPDATE",
                project_id,
                skill,
            )
            assert task is not None, "the history project ran out of open tasks"
            aid = await db.fetchval(
                "INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, status,"
                " claimed_at, lease_until, answer, submitted_at, receipt_id, pay_cents)"
                " VALUES (gen_random_uuid(), $1, $2, $3, $4, 'submitted',"
                " now() - make_interval(secs => ($5::float8 + $6::float8) * 60), now(),"
                " '{}'::jsonb,"
                " now() - make_interval(secs => $5::float8 * 60), gen_random_uuid(), 0)"
                " RETURNING id",
                task["id"],
                task["item_id"],
                project_id,
                expert_id,
                ago,
                on_task,
            )
            await db.execute(
                "UPDATE tasks SET status = 'done', assignment_id = $2 WHERE id = $1",
                task["id"],
                aid,
            )


async def seen(db: asyncpg.Connection, expert_id: str, minutes_ago: float) -> None:
    await db.execute(
        "UPDATE experts SET last_seen_at = now() - make_interval(secs => $2::float8 * 60)"
        " WHERE id = $1",
        expert_id,
        minutes_ago,
    )


async def forecast(api: Api, token: str, project_id: str) -> dict[str, Any]:
    data = await api.gql(
        f"query($p: ID!) {{ forecast(projectId: $p) {{ {FORECAST_FIELDS} }} }}",
        {"p": project_id},
        token,
    )
    return data["forecast"]


def hours_between(later: str, earlier: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds() / 3600
