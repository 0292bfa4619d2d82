"""The levels the routing functions give a task (functions/routing.sql): what the routing job
writes into tasks.eff_priority for a bump, in a scarce skill, and under a fairness boost."""

from __future__ import annotations

import asyncpg
import pytest

LEVEL = 10000  # one project priority level in eff_priority
TASK = 2  # the task's own priority in these cases


@pytest.mark.parametrize(
    ("priority", "bumped", "level"),
    [
        pytest.param(20, False, 20, id="unbumped-normal"),
        pytest.param(-120, False, -120, id="unbumped-low"),
        # one class level up ...
        pytest.param(-120, True, -20, id="bumped-low-one-level"),
        pytest.param(-50, True, 50, id="bumped-low-normal-boundary"),
        # ... but below HIGH never past the top of NORMAL, whatever the priority
        pytest.param(0, True, 99, id="bumped-normal-tops-normal"),
        pytest.param(20, True, 99, id="bumped-normal-stays-under-high"),
        pytest.param(99, True, 99, id="bumped-top-of-normal"),
        # a HIGH project rises one class level
        pytest.param(100, True, 200, id="bumped-high"),
        pytest.param(120, True, 220, id="bumped-high-above"),
    ],
)
async def test_a_bump_is_one_class_level_and_never_passes_high_from_below(
    db: asyncpg.Connection, priority: int, bumped: bool, level: int
) -> None:
    got = await db.fetchval("SELECT routing_eff_priority($1, $2, $3)", priority, bumped, TASK)
    assert got == level * LEVEL + TASK


@pytest.mark.parametrize(
    ("priority", "lifted"),
    [
        # below HIGH: the bump's level, as in any other skill
        pytest.param(-120, -20 * LEVEL + TASK, id="low"),
        pytest.param(-50, 50 * LEVEL + TASK, id="low-normal-boundary"),
        pytest.param(20, 99 * LEVEL + TASK, id="normal"),
        # HIGH: ahead of every unbumped row (customer priorities reach 1000)
        pytest.param(120, 220 * LEVEL + TASK + 2100 * LEVEL, id="high"),
    ],
)
async def test_the_scarce_skill_lift(db: asyncpg.Connection, priority: int, lifted: int) -> None:
    assert await db.fetchval("SELECT routing_scarce_lift($1, $2)", priority, TASK) == lifted
    # a bumped HIGH project's lift sorts above any unbumped customer priority
    if priority >= 100:
        assert lifted > await db.fetchval("SELECT routing_eff_priority(1000, false, 1000)")


async def test_fairness_boosts_sort_ahead_and_are_not_shown(db: asyncpg.Connection) -> None:
    top = await db.fetchval("SELECT routing_scarce_lift(1000, 1000)")
    row = await db.fetchrow("SELECT routing_fair_boost() AS b, routing_fair_threshold() AS t")
    boost, threshold = row["b"], row["t"]
    assert top < threshold < boost + (-1100) * LEVEL - 1000
    for base in (top, 99 * LEVEL + TASK, -1100 * LEVEL - 1000):
        assert await db.fetchval("SELECT routing_base_priority($1)", base + boost) == base
        assert await db.fetchval("SELECT routing_base_priority($1)", base) == base


@pytest.mark.parametrize(
    ("priority", "name"), [(100, "high"), (99, "normal"), (-99, "normal"), (-100, "low")]
)
async def test_priority_classes(db: asyncpg.Connection, priority: int, name: str) -> None:
    assert await db.fetchval("SELECT routing_class($1)", priority) == name
