"""What each request and background job really reads on a churned table (issue 19).

The world of test_plans_on_a_churned_table.py (100k done tasks with their submitted assignments
next to 100k open ones) plus another 100k assignments of history (older attempts whose leases
expired). Here the real calls run, not single statements: the claim, heartbeat and submit
functions with every statement they splice in, and the background jobs (sweeper, routing job,
auto-approval, deadline alerts, the subscriptions' re-checks) through their own Python entry
points. auto_explain (loaded per session, no server setting needed) hands us the executed plan
of every statement, nested ones included, with actual row counts; each node on tasks,
assignments or items must read a bounded number of rows, whatever the history.

The statistics are taken before 800 experts claim, as with autovacuum off: the plans must not
trust them (a claimed-task index that looks empty to the planner holds every live claim).

The alerts job runs the forecasts, which read the maintained counts (task_counts): they
are held to the same bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from taskroute.config import Settings
from taskroute.db.admission import Priority
from taskroute.db.pool import Database, _init_connection, _reset_connection
from taskroute.db.queries import Q
from taskroute.resolvers.alerts import evaluate
from taskroute.resolvers.jobs.auto_approval import auto_approve_once
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once
from taskroute.resolvers.jobs.sweeper import sweep_once

from ..helpers import Dropper, settings_for
from .test_plans_on_a_churned_table import BIG, World, build_churned, build_world, copy_of, nodes

# Rows one plan node may read from a big table (returned plus filtered out, over all loops).
# The world holds 100k-200k rows in each; a probe reads a handful. The request path's bound
# is tight; the jobs' bound allows a batch (the sweeper releases up to 1000 leases a pass).
REQUEST_ROWS = 50
JOB_ROWS = 1000
# Indexes holding open tasks only: a job may count the backlog (routing's scarcity refresh
# does, once per pass), never the history.
# Live claims made after the statistics were taken (see `history`).
LIVE_CLAIMS = 800
BACKLOG_INDEXES = {"tasks_open_claim", "tasks_open_project", "tasks_project_skill_live"}


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", sql)).strip()


class PlanLog:
    """Collects auto_explain's plans (JSON, with ANALYZE) sent to this connection."""

    def __init__(self) -> None:
        self.plans: list[dict[str, Any]] = []

    def listener(self, _conn: Any, message: Any) -> None:
        text = message.message
        if "plan:" in text:
            self.plans.append(json.loads(text.split("plan:", 1)[1]))

    def take(self) -> list[dict[str, Any]]:
        taken, self.plans = self.plans, []
        return taken


async def _log_plans(conn: asyncpg.Connection) -> None:
    await conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("log_min_duration", "0"),
        ("log_analyze", "on"),
        ("log_nested_statements", "on"),
        ("log_format", "json"),
        ("log_level", "notice"),
    ):
        await conn.execute(f"SET auto_explain.{setting} = '{value}'")
    await conn.execute("SET client_min_messages = notice")


def _bitmap_indexes(node: dict[str, Any]) -> list[str]:
    """The indexes a Bitmap Heap Scan's bitmap comes from (through BitmapAnd/BitmapOr)."""
    return sorted(
        str(n.get("Index Name")) for n in nodes(node) if n["Node Type"] == "Bitmap Index Scan"
    )


def big_reads(plan: dict[str, Any]) -> list[tuple[str, str | None, int]]:
    """(node on a big table, its index, rows it read) for every node of one executed plan;
    a scan of a whole big table counts as reading it all, even when it did not run. A
    Bitmap Heap Scan reads what its bitmap's indexes found, as an Index Scan does: its rows
    (returned, filtered out, rechecked on lossy pages) are counted as they are, under the
    name of the index its bitmap comes from."""
    found = []
    for n in nodes(plan["Plan"]):
        if n.get("Relation Name") not in BIG:
            continue
        per_loop = (
            n.get("Actual Rows", 0)
            + n.get("Rows Removed by Filter", 0)
            + n.get("Rows Removed by Index Recheck", 0)
        )
        read = int(per_loop * max(1, n.get("Actual Loops", 1)))
        index = n.get("Index Name")
        if n["Node Type"] == "Bitmap Heap Scan":
            index = ",".join(_bitmap_indexes(n)) or None
        elif n["Node Type"] == "Seq Scan":
            read = max(read, 10**9)
        node = f"{n['Node Type']} on {n['Relation Name']} ({index})"
        found.append((node, index, read))
    return found


def too_many(plans: list[dict[str, Any]], limit: int, skip: tuple[str, ...] = ()) -> list[str]:
    skipped = {_norm(Q[name]) for name in skip}
    bad = []
    for p in plans:
        query = _norm(p.get("Query Text", ""))
        if query in skipped:
            continue
        for node, index, read in big_reads(p):
            if read > limit and index not in BACKLOG_INDEXES:
                bad.append(f"{node} read {read} rows in: {query[:160]}")
    return bad


@pytest_asyncio.fixture(scope="module")
async def history_world(
    pg_admin_dsn: str, template_db: str, dropper: Dropper
) -> AsyncIterator[World]:
    world = await build_world(pg_admin_dsn, template_db, build_churned, build_history)
    yield world
    dropper.drop(world.database)


@pytest_asyncio.fixture
async def database_url(
    pg_admin_dsn: str, history_world: World, dropper: Dropper
) -> AsyncIterator[str]:
    """This module's tests start from a copy of the world, not the empty template."""
    async with copy_of(pg_admin_dsn, history_world, dropper) as url:
        yield url


@pytest.fixture
def history(history_world: World) -> dict[str, Any]:
    return history_world.facts


async def build_history(db: asyncpg.Connection, churned: dict[str, Any]) -> dict[str, Any]:
    """Another 100k assignments of history: an expired attempt by another expert before each
    done task's answer, as a busy queue accumulates them."""
    experts = [r["id"] for r in await db.fetch("SELECT id FROM experts ORDER BY id")]
    await db.execute(
        """
        INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, status,
                                 claimed_at, lease_until)
        SELECT gen_random_uuid(), t.id, t.item_id, t.project_id,
               CASE WHEN e.pick = a.expert_id THEN e.next ELSE e.pick END, 'expired',
               a.claimed_at - interval '1 hour', a.claimed_at - interval '30 minutes'
        FROM tasks t
        JOIN assignments a ON a.id = t.assignment_id,
        LATERAL (SELECT ($1::uuid[])[1 + t.seq % 50] AS pick,
                        ($1::uuid[])[1 + (t.seq + 1) % 50] AS next) e
        WHERE t.status = 'done'
        """,
        experts,
    )
    # A second live claim whose expert went silent and whose lease ended: the sweeper's work.
    w = churned
    silent = await db.fetchval("SELECT id FROM experts WHERE id <> $1 LIMIT 1", w["expert"])
    task = await db.fetchrow(
        "SELECT id, item_id FROM tasks WHERE status = 'open' ORDER BY seq DESC LIMIT 1"
    )
    stale = await db.fetchval(
        "INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until,"
        " claimed_at) VALUES (gen_random_uuid(), $1, $2, $3, $4, now() - interval '1 minute',"
        " now() - interval '2 hours') RETURNING id",
        task["id"], task["item_id"], w["project"], silent,
    )  # fmt: skip
    await db.execute(
        "UPDATE tasks SET status = 'claimed', assignment_id = $2,"
        " lease_until = now() - interval '1 minute' WHERE id = $1",
        task["id"], stale,
    )  # fmt: skip
    # The project is older than the routing job's forecast window, so the deadline bump
    # really computes its forecast (a younger project is skipped before any count).
    await db.execute(
        "UPDATE projects SET created_at = now() - interval '1 day' WHERE id = $1", w["project"]
    )
    await db.execute("VACUUM ANALYZE")
    # Then, with autovacuum off (as on this machine), 800 more experts claim: the statistics
    # saw two live claims, so the claimed-task indexes look empty to the planner. A plan that
    # trusts them walks every live claim per heartbeat, submit or claim (it did: 801 rows).
    await db.execute(
        """
        WITH e AS (
            INSERT INTO experts (name) SELECT 'busy' || g FROM generate_series(1, $2::int) g
            RETURNING id
        ), pick AS (
            SELECT t.id, t.item_id, t.project_id, e.id AS expert_id, gen_random_uuid() AS aid
            FROM (SELECT id, row_number() OVER () AS n FROM e) e
            JOIN (SELECT id, item_id, project_id, row_number() OVER (ORDER BY seq) AS n
                  FROM tasks WHERE status = 'open' AND skill <> $1) t ON t.n = e.n
        ), a AS (
            INSERT INTO assignments (id, task_id, item_id, project_id, expert_id, lease_until)
            SELECT aid, id, item_id, project_id, expert_id, now() + interval '1 hour' FROM pick
        )
        UPDATE tasks t SET status = 'claimed', assignment_id = p.aid,
                           lease_until = now() + interval '1 hour'
        FROM pick p WHERE t.id = p.id
        """,
        w["skill"],
        LIVE_CLAIMS,
    )
    return {**w, "claimer": silent}


class LoggedDatabase(Database):
    """A Database whose connections hand every statement's plan to `log` while borrowed."""

    def __init__(self, pool: asyncpg.Pool, log: PlanLog) -> None:
        super().__init__(pool, timeout=30)
        self.log = log

    @asynccontextmanager
    async def connection(self, priority: Priority | None = None) -> AsyncIterator[Any]:
        async with super().connection(priority) as conn:
            conn.add_log_listener(self.log.listener)
            try:
                yield conn
            finally:
                conn.remove_log_listener(self.log.listener)


@pytest_asyncio.fixture
async def logged(
    database_url: str, db: asyncpg.Connection, tmp_path: Path
) -> AsyncIterator[tuple[Database, PlanLog, Settings]]:
    log = PlanLog()

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        await _log_plans(conn)

    # the app's no-op reset: asyncpg's default (RESET ALL) would turn the logging off
    pool = await asyncpg.create_pool(
        database_url, min_size=1, max_size=2, init=init, reset=_reset_connection
    )
    assert pool is not None
    try:
        yield LoggedDatabase(pool, log), log, settings_for(database_url, tmp_path)
    finally:
        await pool.close()


async def test_claim_heartbeat_and_submit_read_a_bounded_number_of_rows(
    history: dict[str, Any],
    logged: tuple[Database, PlanLog, Settings],
) -> None:
    db, log, _ = logged
    w = history
    async with db.connection() as conn:
        log.take()  # the pool's own set-up statements
        beat = await conn.fetchrow(Q["heartbeat_call"], w["assignment"], w["expert"])
        assert beat["outcome"] == "extended", dict(beat)
        heartbeat = log.take()
        receipt = await conn.fetchrow(
            Q["submit_unless_schema_call"], w["assignment"], w["expert"], '{"label": 1}'
        )
        assert receipt["outcome"] == "stored", dict(receipt)
        submit = log.take()
        claim = await conn.fetchrow(Q["claim_call"], w["expert"], None, None, 0.99)
        assert claim["outcome"] == "claimed", dict(claim)
        claimed = log.take()
    # Every statement the functions ran was seen (nested ones included), each a probe.
    assert len(heartbeat) >= 3 and len(submit) >= 10 and len(claimed) >= 5
    assert too_many(heartbeat, REQUEST_ROWS) == []
    assert too_many(submit, REQUEST_ROWS) == []
    assert too_many(claimed, REQUEST_ROWS) == []


async def test_background_jobs_read_a_bounded_number_of_rows(
    history: dict[str, Any],
    logged: tuple[Database, PlanLog, Settings],
    db: asyncpg.Connection,
) -> None:
    jobs, log, settings = logged
    w = history
    log.take()
    assert await sweep_once(jobs) == 1  # the silent expert's claim
    swept = log.take()
    report = await routing_once(jobs, RoutingPolicy.from_settings(settings))
    assert report.ran
    routed = log.take()
    await auto_approve_once(jobs)
    approved = log.take()
    assert await evaluate(jobs, settings, wait=True) is not None
    alerts = log.take()
    # The subscriptions' re-check: an expert's catch-up (taskAvailable).
    async with jobs.connection() as conn:
        await conn.fetch(Q["expert_skills_available"], w["expert"], None)
    rechecks = log.take()
    found = {
        "sweeper": too_many(swept, JOB_ROWS),
        "routing": too_many(routed, JOB_ROWS, skip=("routing_deadline_bump",)),
        "auto-approval": too_many(approved, JOB_ROWS),
        "alerts": too_many(alerts, JOB_ROWS),
        "subscription re-checks": too_many(rechecks, JOB_ROWS),
    }
    assert found == {name: [] for name in found}
    # Every job ran statements (the log saw them), so an empty finding means something.
    assert all([swept, routed, approved, alerts, rechecks])


async def test_progress_recount_reads_a_bounded_number_of_rows(
    history: dict[str, Any],
    logged: tuple[Database, PlanLog, Settings],
    db: asyncpg.Connection,
) -> None:
    """projectProgress's counts come from the maintained counts (which keep gold
    servings apart), not from a recount of the project's 200k tasks; and they are the
    recount's figures."""
    jobs, log, _ = logged
    log.take()
    async with jobs.connection() as conn:
        rows = await conn.fetch(Q["projects_progress_many"], [history["project"]])
    assert too_many(log.take(), JOB_ROWS) == []
    recount = await db.fetchrow(
        "SELECT count(*) AS total,"
        " count(*) FILTER (WHERE status IN ('open', 'pending')) AS open,"
        " count(*) FILTER (WHERE status = 'claimed') AS claimed,"
        " count(*) FILTER (WHERE status = 'done') AS done"
        " FROM tasks WHERE project_id = $1 AND kind <> 'gold'",
        history["project"],
    )
    assert recount["total"] > 100_000  # the history is really there
    assert [{k: r[k] for k in ("total", "open", "claimed", "done")} for r in rows] == [
        dict(recount)
    ]


async def test_customer_summary_reads_a_bounded_number_of_rows(
    history: dict[str, Any],
    logged: tuple[Database, PlanLog, Settings],
    db: asyncpg.Connection,
) -> None:
    """The customer's summary (their dashboard) sums the maintained counts of their projects;
    it recounted every task they ever had (200k here)."""
    jobs, log, _ = logged
    customer = await db.fetchval(
        "SELECT customer_id FROM projects WHERE id = $1", history["project"]
    )
    log.take()
    async with jobs.connection() as conn:
        row = await conn.fetchrow(Q["customer_projects_summary"], customer, None)
    assert too_many(log.take(), JOB_ROWS) == []
    recount = await db.fetchrow(
        "SELECT count(*) AS tasks, count(*) FILTER (WHERE t.status = 'done') AS done"
        " FROM tasks t JOIN projects p ON p.id = t.project_id"
        " WHERE p.customer_id = $1 AND t.kind <> 'gold'",
        customer,
    )
    assert recount["tasks"] > 100_000
    assert (row["tasks"], row["done"]) == (recount["tasks"], recount["done"])


async def test_deadline_bump_reads_a_bounded_number_of_rows(
    history: dict[str, Any],
    logged: tuple[Database, PlanLog, Settings],
) -> None:
    jobs, log, settings = logged
    log.take()
    assert (await routing_once(jobs, RoutingPolicy.from_settings(settings))).ran
    bumps = [p for p in log.take() if _norm(p["Query Text"]) == _norm(Q["routing_deadline_bump"])]
    assert bumps
    assert too_many(bumps, JOB_ROWS, skip=()) == []
