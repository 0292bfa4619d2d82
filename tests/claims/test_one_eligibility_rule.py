"""One eligibility rule, four users: they must agree on the same world.

"May this expert take this task" is the `task_eligible` / `eligible_skills` fragments of
queries/eligibility.sql, spliced into the claim (`task_claim`), gold serving (`gold_claim`:
is there real work to mix gold into), the heartbeat's hasHighPriorityTasks
(`assignment_heartbeat`) and the subscription catch-up (`expert_skills_available`). This test
builds one world in SQL with one case per way a task can be (in)eligible, each case its own
expert, skill and project, and asks every user. The statements are the ones the service runs
(the claim functions splice the same text).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from taskroute.db.queries import Q

HIGH, LOW = 100, -100


@dataclass
class Case:
    name: str
    eligible: bool
    # what makes this case what it is
    required_caps: list[str] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    skill_status: str = "active"
    expert_status: str = "active"
    project_status: str = "active"
    answered_before: bool = False
    min_quality: float = 0.0
    quality: float = 1.0
    other_skill: bool = False


CASES = [
    Case("plain", True),
    Case("caps_missing", False, required_caps=["medical"]),
    Case("caps_held", True, required_caps=["medical"], capabilities=["legal", "medical"]),
    Case("skill_paused", False, skill_status="paused"),
    Case("expert_disabled", False, expert_status="disabled"),
    Case("project_canceled", False, project_status="canceled"),
    Case("project_ingesting", False, project_status="ingesting"),
    Case("item_answered", False, answered_before=True),
    Case("quality_low", False, min_quality=0.9, quality=0.5),
    Case("quality_enough", True, min_quality=0.5, quality=0.5),
    Case("skill_not_held", False, other_skill=True),
]


@dataclass
class Built:
    case: Case
    expert: uuid.UUID
    project: uuid.UUID
    task: uuid.UUID


async def _project(db: asyncpg.Connection, customer: uuid.UUID, priority: int, status: str) -> Any:
    project = await db.fetchval(
        "INSERT INTO projects (customer_id, name, priority, status) VALUES ($1, 'p', $2, $3)"
        " RETURNING id",
        customer,
        priority,
        status,
    )
    # Gold is served whenever the project has real work the expert may take.
    await db.execute("UPDATE project_quality SET gold_ratio = 1 WHERE project_id = $1", project)
    return project


async def _task(
    db: asyncpg.Connection,
    project: uuid.UUID,
    skill: str,
    priority: int,
    *,
    status: str = "open",
    item: uuid.UUID | None = None,
    required_caps: list[str] | None = None,
    min_quality: float = 0.0,
) -> tuple[uuid.UUID, uuid.UUID]:
    if item is None:
        item = await db.fetchval(
            "INSERT INTO items (project_id, skill, payload) VALUES ($1, $2, '{}') RETURNING id",
            project,
            skill,
        )
    task = await db.fetchval(
        "INSERT INTO tasks (item_id, project_id, skill, priority, eff_priority, status,"
        " required_caps, min_quality)"
        " VALUES ($1, $2, $3, 0, routing_eff_priority($4, false, 0), $5, $6, $7) RETURNING id",
        item,
        project,
        skill,
        priority,
        status,
        required_caps or [],
        min_quality,
    )
    return item, task


async def _assign(
    db: asyncpg.Connection, task: uuid.UUID, expert: uuid.UUID, status: str
) -> uuid.UUID:
    assignment = uuid.uuid4()
    row = await db.fetchrow("SELECT item_id, project_id FROM tasks WHERE id = $1", task)
    await db.execute(
        "INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, status,"
        " lease_until) VALUES ($1, $2, $3, $4, $5, $6, now() + interval '1 hour')",
        assignment,
        task,
        row["item_id"],
        row["project_id"],
        expert,
        status,
    )
    await db.execute(
        "UPDATE tasks SET status = $2, assignment_id = $3, lease_until = now() + interval '1 hour'"
        " WHERE id = $1",
        task,
        "claimed" if status == "active" else "done",
        assignment,
    )
    return assignment


async def build(db: asyncpg.Connection, case: Case, customer: uuid.UUID, hold: Any) -> Built:
    skill, hold_skill = f"s_{case.name}", f"h_{case.name}"
    expert = await db.fetchval(
        "INSERT INTO experts (name, capabilities) VALUES ($1, $2) RETURNING id",
        case.name,
        case.capabilities,
    )
    await db.execute(
        "INSERT INTO expert_skills (expert_id, skill, quality, status, starting_quality)"
        " VALUES ($1, $2, $3, $4, $3), ($1, $5, 1.0, 'active', 1.0)",
        expert,
        "unrelated" if case.other_skill else skill,
        case.quality,
        case.skill_status,
        hold_skill,
    )
    project = await _project(db, customer, HIGH, "active")
    item = None
    if case.answered_before:
        item, first = await _task(db, project, skill, HIGH)
        await _assign(db, first, expert, "submitted")
    _, task = await _task(
        db,
        project,
        skill,
        HIGH,
        item=item,
        required_caps=case.required_caps,
        min_quality=case.min_quality,
    )
    await db.execute(
        "INSERT INTO items (project_id, skill, payload, gold_answer) VALUES ($1, $2, '{}', '1')",
        project,
        skill,
    )
    await db.execute("UPDATE projects SET status = $2 WHERE id = $1", project, case.project_status)
    await db.execute("UPDATE experts SET status = $2 WHERE id = $1", expert, case.expert_status)
    # A live claim in a low-priority project, held during the heartbeat check only.
    _, held_task = await _task(db, hold, hold_skill, LOW)
    return Built(case, expert, project, task)


async def _rolled_back(db: asyncpg.Connection, query: str, *args: Any) -> asyncpg.Record | None:
    tx = db.transaction()
    await tx.start()
    try:
        return await db.fetchrow(query, *args)
    finally:
        await tx.rollback()


async def test_every_user_of_the_rule_agrees_on_every_case(db: asyncpg.Connection) -> None:
    customer = await db.fetchval("INSERT INTO customers (name) VALUES ('c') RETURNING id")
    hold = await _project(db, customer, LOW, "active")
    built = [await build(db, c, customer, hold) for c in CASES]
    elsewhere = await _project(db, customer, HIGH, "active")

    verdicts: dict[str, dict[str, bool]] = {}
    for b in built:
        v: dict[str, bool] = {}
        row = await _rolled_back(db, Q["task_claim"], b.expert, None, None)
        v["claim"] = row is not None and row["task_id"] == b.task
        row = await _rolled_back(db, Q["task_claim"], b.expert, None, b.project)
        v["claim scoped to its project"] = row is not None and row["task_id"] == b.task
        v["gold"] = await _rolled_back(db, Q["gold_claim"], b.expert, None, None, 0.0) is not None
        row = await _rolled_back(db, Q["gold_claim"], b.expert, None, b.project, 0.0)
        v["gold scoped to its project"] = row is not None
        available = await db.fetch(Q["expert_skills_available"], b.expert, None)
        v["catch-up"] = any(r["project_id"] == b.project for r in available)
        verdicts[b.case.name] = v
        # Scoped to a project with nothing for them: no claim, no gold, whatever the case.
        assert await _rolled_back(db, Q["task_claim"], b.expert, None, elsewhere) is None
        assert await _rolled_back(db, Q["gold_claim"], b.expert, None, elsewhere, 0.0) is None

    # The heartbeat flag: each expert holds a low-priority claim; is higher work claimable?
    held_tasks = await db.fetch(
        "SELECT t.id, t.skill FROM tasks t WHERE t.project_id = $1 ORDER BY t.seq", hold
    )
    for b, held in zip(built, held_tasks, strict=True):
        assignment = await _assign(db, held["id"], b.expert, "active")
        row = await db.fetchrow(Q["assignment_heartbeat"], assignment, b.expert)
        assert row is not None, b.case.name
        verdicts[b.case.name]["heartbeat flag"] = row["has_high_priority_tasks"]

    wrong = {
        name: {user: got for user, got in v.items() if got != case.eligible}
        for case, (name, v) in zip(CASES, verdicts.items(), strict=True)
    }
    assert not any(wrong.values()), f"users disagree with the rule: {wrong}"
    # The world really has both kinds of case (a rule that says "no" to all would pass above).
    assert {c.eligible for c in CASES} == {True, False}
