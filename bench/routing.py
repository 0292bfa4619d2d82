"""Routing simulator: a discrete-event simulation that drives the real claim SQL.

A synthetic world (experts with Zipf-distributed skill sets, projects of three priority
classes with deadlines arriving over time, tasks over ~200 skills with per-skill durations)
is loaded into its own temporary database. Simulated experts then claim with the
application's `task_claim` (and the routing job `routing_once` on simulated time), or with a
plain priority-then-FIFO claim for comparison, and the figures of issue 6 are printed next to
a makespan lower bound from an LP relaxation of the same world.

    PYTHONPATH=. python bench/routing.py          # 2000 experts, 20k tasks: ~3 min on 2 busy cores
    PYTHONPATH=. python bench/routing.py --experts 500 --tasks 4000   # quick look

Figures are in simulated time; the wall-clock lines (run time, claim round trips) depend on
the machine's load and are not targets.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import math
import os
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import Database, create_pool  # noqa: E402
from taskroute.db.queries import Q, load  # noqa: E402
from taskroute.resolvers.routing import RoutingPolicy, routing_once  # noqa: E402

BQ = load(Path(__file__).parent / "sql")
CLASS_LEVEL = {"high": 100, "normal": 0, "low": -100}


# --- the world ------------------------------------------------------------------------------


@dataclass
class Project:
    id: uuid.UUID
    cls: str
    priority: int
    release: float
    deadline: float = 0.0
    tasks: list[int] = field(default_factory=list)
    skills: set[str] = field(default_factory=set)


@dataclass
class World:
    skills: list[str]
    experts: list[uuid.UUID]
    expert_skills: dict[uuid.UUID, list[str]]
    projects: list[Project]
    # per task (index): item id, project index, skill, duration (s), task priority
    item: list[uuid.UUID]
    project_of: list[int]
    skill_of: list[str]
    duration: list[float]
    task_priority: list[int]
    rare: set[str]


def build_world(args: argparse.Namespace) -> World:
    rng = np.random.default_rng(args.seed)
    skills = [f"s{k:03d}" for k in range(args.skills)]
    ranks = np.arange(1, args.skills + 1)
    # Expert supply per skill is Zipf; demand falls off more slowly (supply ** demand_exp),
    # so there is more work per qualified expert in the tail: the rare skills are scarce.
    supply = 1.0 / ranks**args.zipf
    supply /= supply.sum()
    demand = supply**args.demand_exp
    demand /= demand.sum()

    def new_id() -> uuid.UUID:  # seeded, so a world (and its tie-breaks) is reproducible
        return uuid.UUID(bytes=rng.bytes(16), version=4)

    experts = [new_id() for _ in range(args.experts)]
    held: dict[uuid.UUID, list[str]] = {}
    for e in experts:
        k = min(1 + int(rng.geometric(0.5)) - 1, 6) if args.experts else 1
        k = max(1, k)
        picks = rng.choice(args.skills, size=k, replace=False, p=supply)
        held[e] = [skills[i] for i in picks]
    covered = {s for ss in held.values() for s in ss}
    for s in skills:  # every skill has at least one expert
        if s not in covered:
            held[experts[int(rng.integers(len(experts)))]].append(s)
    holders = defaultdict(int)
    for ss in held.values():
        for s in ss:
            holders[s] += 1
    counts = sorted(holders[s] for s in skills)
    rare_cut = counts[max(0, len(counts) // 10 - 1)]  # the scarcest tenth of the skills
    rare = {s for s in skills if holders[s] <= rare_cut}

    # Projects: three classes, arrivals over the first part of the horizon.
    base_duration = {s: float(rng.lognormal(math.log(args.mean_duration), 0.4)) for s in skills}
    horizon = args.tasks * args.mean_duration / max(1, args.experts * 2)
    classes = rng.choice(["high", "normal", "low"], size=args.projects, p=[0.2, 0.5, 0.3])
    sizes = rng.dirichlet(np.ones(args.projects) * 2) * args.tasks
    projects: list[Project] = []
    for i in range(args.projects):
        cls = str(classes[i])
        release = 0.0 if i < args.projects // 4 else float(rng.uniform(0, horizon))
        jitter = int(rng.integers(0, 40))
        priority = CLASS_LEVEL[cls] + (jitter if cls != "low" else -jitter)
        if cls == "normal":
            priority = jitter - 20
        projects.append(Project(new_id(), cls, priority, release))
    projects.sort(key=lambda p: p.release)

    item, project_of, skill_of, duration, task_priority = [], [], [], [], []
    for pi, p in enumerate(projects):
        n = max(1, int(round(sizes[pi])))
        for j in rng.choice(args.skills, size=n, p=demand):
            s = skills[int(j)]
            p.skills.add(s)
            idx = len(item)
            item.append(new_id())
            project_of.append(pi)
            skill_of.append(s)
            duration.append(max(10.0, base_duration[s] * float(rng.lognormal(0, 0.3))))
            task_priority.append(int(rng.integers(0, 4)))
            p.tasks.append(idx)
    return World(
        skills, experts, held, projects, item, project_of, skill_of, duration, task_priority, rare
    )


def assign_deadlines(world: World, bound: float, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    for p in world.projects:
        span = max(bound - p.release, 600.0)
        p.deadline = p.release + float(rng.uniform(0.5, 1.5)) * span


# --- the LP lower bound -------------------------------------------------------------------


def lp_makespan(world: World, tasks: list[int]) -> float:
    """Least T such that the work of `tasks` can be split (fractionally, preemptively) over
    the experts qualified for each skill with nobody working more than T: a max-flow / LP
    relaxation, so no schedule of the same tasks can finish sooner."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    work: dict[str, float] = defaultdict(float)
    for t in tasks:
        work[world.skill_of[t]] += world.duration[t]
    if not work:
        return 0.0
    skills = sorted(work)
    sidx = {s: i for i, s in enumerate(skills)}
    pairs = [
        (sidx[s], ei)
        for ei, e in enumerate(world.experts)
        for s in world.expert_skills[e]
        if s in sidx
    ]
    n = len(pairs) + 1  # x per (skill, expert) pair, then T
    a_eq = lil_matrix((len(skills), n))
    a_ub = lil_matrix((len(world.experts), n))
    for j, (si, ei) in enumerate(pairs):
        a_eq[si, j] = 1.0
        a_ub[ei, j] = 1.0
    a_ub[:, n - 1] = -1.0
    c = np.zeros(n)
    c[-1] = 1.0
    res = linprog(
        c,
        A_ub=a_ub.tocsr(),
        b_ub=np.zeros(len(world.experts)),
        A_eq=a_eq.tocsr(),
        b_eq=np.array([work[s] for s in skills]),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"LP failed: {res.message}")
    return float(res.x[-1])


def lower_bound(world: World) -> float:
    """Work released at or after r cannot start before r: max over releases of r + LP(r)."""
    best = max(
        world.projects[world.project_of[t]].release + world.duration[t]
        for t in range(len(world.item))
    )
    for r in sorted({p.release for p in world.projects}):
        later = [
            t for t in range(len(world.item)) if world.projects[world.project_of[t]].release >= r
        ]
        best = max(best, r + lp_makespan(world, later))
    return best


# --- the database -------------------------------------------------------------------------


def dsn_for(admin: str, name: str) -> str:
    return admin.rsplit("/", 1)[0] + "/" + name


async def load_world(url: str, world: World, base: datetime) -> None:
    conn = await asyncpg.connect(url)
    try:
        customer = await conn.fetchval("INSERT INTO customers (name) VALUES ('bench') RETURNING id")
        await conn.copy_records_to_table(
            "experts",
            records=[(e, f"x{i}", base) for i, e in enumerate(world.experts)],
            columns=["id", "name", "created_at"],
        )
        await conn.copy_records_to_table(
            "expert_skills",
            records=[(e, s) for e in world.experts for s in world.expert_skills[e]],
            columns=["expert_id", "skill"],
        )
        await conn.copy_records_to_table(
            "projects",
            records=[
                (
                    p.id,
                    customer,
                    f"p{i}-{p.cls}",
                    p.priority,
                    base + timedelta(seconds=p.deadline),
                    7 * 86400,
                    base + timedelta(seconds=p.release),
                )
                for i, p in enumerate(world.projects)
            ],
            columns=[
                "id",
                "customer_id",
                "name",
                "priority",
                "deadline",
                "lease_seconds",
                "created_at",
            ],
        )
        n = len(world.item)
        await conn.copy_records_to_table(
            "items",
            records=[
                (world.item[t], world.projects[world.project_of[t]].id, world.skill_of[t], "{}")
                for t in range(n)
            ],
            columns=["id", "project_id", "skill", "payload"],
        )
        # In arrival order, so seq is FIFO; eff_priority as the application writes it.
        await conn.copy_records_to_table(
            "tasks",
            records=[
                (
                    world.item[t],
                    world.projects[world.project_of[t]].id,
                    world.skill_of[t],
                    world.task_priority[t],
                    world.projects[world.project_of[t]].priority * 10000 + world.task_priority[t],
                    "pending",
                )
                for t in range(n)
            ],
            columns=["item_id", "project_id", "skill", "priority", "eff_priority", "status"],
        )
        await conn.execute(BQ["bench_clock_default"])
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


# --- the simulation -----------------------------------------------------------------------


@dataclass
class Outcome:
    policy: str
    claimed: dict[int, float] = field(default_factory=dict)
    finished: dict[int, float] = field(default_factory=dict)
    claims: int = 0
    empty_claims: int = 0
    jobs: int = 0
    bumps: int = 0
    boosted: int = 0
    wall: float = 0.0
    claim_wall: float = 0.0
    claim_times: list[float] = field(default_factory=list)
    job_wall: float = 0.0


async def simulate(url: str, world: World, base: datetime, policy: str, args) -> Outcome:
    pool = await create_pool(url, 1, 2)
    db = Database(pool, 30)
    out = Outcome(policy)
    started = time.monotonic()
    task_of_item = {it: t for t, it in enumerate(world.item)}
    holders: dict[str, list[uuid.UUID]] = defaultdict(list)
    for e in world.experts:
        for s in world.expert_skills[e]:
            holders[s].append(e)
    routing = RoutingPolicy(
        fair_window=args.fair_window,
        forecast_window=args.forecast_window,
        active_window=1e9,
    )
    # taskroute-nojob: the application's claim without the routing job (an ablation)
    claim_sql = Q["task_claim"] if policy.startswith("taskroute") else BQ["bench_baseline_claim"]
    events: list[tuple[float, int, str, object]] = []
    seq = 0

    def push(at: float, kind: str, what: object) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (at, seq, kind, what))

    for pi, p in enumerate(world.projects):
        push(p.release, "release", pi)
    if policy == "taskroute":
        push(0.0, "job", None)
    idle: set[uuid.UUID] = set(world.experts)
    total = len(world.item)

    def ts(at: float) -> datetime:
        return base + timedelta(seconds=at)

    async with db.connection() as conn:
        if args.generic_plans:
            await conn.execute("SET plan_cache_mode = force_generic_plan")

        async def try_claim(expert: uuid.UUID, now: float) -> None:
            t0 = time.monotonic()
            row = await conn.fetchrow(claim_sql, expert, None, None)
            out.claim_times.append(time.monotonic() - t0)
            out.claim_wall += out.claim_times[-1]
            out.claims += 1
            if row is None:
                out.empty_claims += 1
                idle.add(expert)
                return
            idle.discard(expert)
            t = task_of_item[row["item_id"]]
            out.claimed[t] = now
            push(now + world.duration[t], "done", (expert, row["assignment_id"], t))

        while events:
            now, _, kind, what = heapq.heappop(events)
            if kind == "release":
                p = world.projects[what]  # type: ignore[index]
                await conn.execute(BQ["bench_release"], p.id, ts(now))
                woken = sorted({e for s in p.skills for e in holders[s] if e in idle}, key=str)
                for e in woken:
                    await try_claim(e, now)
            elif kind == "done":
                expert, assignment, t = what  # type: ignore[misc]
                await conn.execute(BQ["bench_complete"], assignment, ts(now), expert)
                out.finished[t] = now
                if len(out.finished) % args.analyze_every == 0:
                    # What autovacuum does in a live system: the claim's plans rely on the
                    # statistics of tables that grow from empty during the run.
                    await conn.execute("ANALYZE tasks, assignments")
                if args.explain and len(out.finished) == total // 2:
                    await explain_claim(conn, claim_sql, expert)
                await try_claim(expert, now)
            elif kind == "job":
                t0 = time.monotonic()
                report = await routing_once(db, routing, ts(now))
                out.job_wall += time.monotonic() - t0
                out.jobs += 1
                out.bumps += len(report.bumps)
                out.boosted += report.boosted
                if len(out.finished) < total:
                    push(now + args.job_interval, "job", None)
    await pool.close()
    out.wall = time.monotonic() - started
    if len(out.finished) != total:
        raise RuntimeError(f"{policy}: only {len(out.finished)} of {total} tasks finished")
    return out


async def explain_claim(conn: asyncpg.Connection, claim_sql: str, expert: uuid.UUID) -> None:
    """Half way through: how one claim executes (rolled back), for --explain."""
    tr = conn.transaction()
    await tr.start()
    try:
        rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + claim_sql, expert, None, None)
    finally:
        await tr.rollback()
    print("\n".join(r[0] for r in rows), flush=True)


# --- the figures --------------------------------------------------------------------------


def figures(world: World, out: Outcome) -> dict[str, object]:
    makespan = max(out.finished.values())
    per_class: dict[str, list[float]] = defaultdict(list)
    class_end: dict[str, float] = defaultdict(float)
    for t, done in out.finished.items():
        p = world.projects[world.project_of[t]]
        per_class[p.cls].append(done - p.release)
        class_end[p.cls] = max(class_end[p.cls], done)
    rare_done = [out.finished[t] for t in range(len(world.item)) if world.skill_of[t] in world.rare]
    waits = [
        out.claimed[t] - world.projects[world.project_of[t]].release for t in range(len(world.item))
    ]
    met = 0
    for p in world.projects:
        end = max(out.finished[t] for t in p.tasks)
        met += end <= p.deadline
    return {
        "makespan": makespan,
        "classes": {
            c: (float(np.mean(v)), float(np.percentile(v, 95)), class_end[c])
            for c, v in sorted(per_class.items())
        },
        "rare_drain": max(rare_done) if rare_done else 0.0,
        "worst_wait": max(waits),
        "deadlines": (met, len(world.projects)),
    }


def hours(s: float) -> str:
    return f"{s / 3600:6.2f} h"


def report(world: World, bound: float, results: list[tuple[Outcome, dict]]) -> None:
    rare_tasks = sum(1 for s in world.skill_of if s in world.rare)
    print(
        f"\nworld: {len(world.experts)} experts, {len(world.item)} tasks, {len(world.skills)} "
        f"skills ({len(world.rare)} rare, {rare_tasks} rare-skill tasks), "
        f"{len(world.projects)} projects "
        + str({c: sum(p.cls == c for p in world.projects) for c in ("high", "normal", "low")})
    )
    print(f"makespan lower bound (LP relaxation, per release): {hours(bound)}")
    for out, f in results:
        print(f"\n== {out.policy} ==")
        ratio = f["makespan"] / bound
        print(f"  makespan                {hours(f['makespan'])}  ({ratio:.2f} x bound)")
        for c, (mean, p95, end) in f["classes"].items():
            print(
                f"  {c:<6} completion       mean {hours(mean)}  p95 {hours(p95)}  last {hours(end)}"
            )
        print(f"  rare-skill backlog drain {hours(f['rare_drain'])}")
        print(f"  worst starvation (wait)  {hours(f['worst_wait'])}")
        met, n = f["deadlines"]
        print(f"  deadlines met            {met}/{n}")
        print(
            f"  claims {out.claims} (empty {out.empty_claims}), routing jobs {out.jobs}, "
            f"bumps {out.bumps}, boosted {out.boosted}; wall {out.wall:.0f} s"
            f" (claims {out.claim_wall:.0f} s, routing jobs {out.job_wall:.0f} s)"
        )
        ms = np.array(out.claim_times) * 1000
        print(
            f"  claim round trip (wall, loaded machine): p50 {np.percentile(ms, 50):.1f} ms"
            f"  p95 {np.percentile(ms, 95):.1f} ms  max {ms.max():.0f} ms"
        )


async def main(args: argparse.Namespace) -> None:
    t0 = time.monotonic()
    world = build_world(args)
    bound = lower_bound(world)
    assign_deadlines(world, bound, args.seed)
    print(f"world built and bound solved in {time.monotonic() - t0:.1f} s", flush=True)
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    tag = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
    template = f"taskroute_bench_{tag}"
    admin = await asyncpg.connect(args.dsn)
    made = [template]
    try:
        await admin.execute(f'CREATE DATABASE "{template}"')
        await migrate_url(dsn_for(args.dsn, template))
        await load_world(dsn_for(args.dsn, template), world, base)
        results = []
        for policy in args.policies:
            name = f"taskroute_bench_{tag}_{policy.replace('-', '_')}"
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            made.append(name)
            out = await simulate(dsn_for(args.dsn, name), world, base, policy, args)
            print(f"{policy}: simulated in {out.wall:.0f} s", flush=True)
            results.append((out, figures(world, out)))
        report(world, bound, results)
    finally:
        for name in reversed(made):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dsn",
        default=os.environ.get(
            "TASKROUTE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    ap.add_argument("--experts", type=int, default=2000)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--skills", type=int, default=200)
    ap.add_argument("--projects", type=int, default=40)
    ap.add_argument("--zipf", type=float, default=1.1, help="skill supply exponent")
    ap.add_argument(
        "--demand-exp", type=float, default=0.8, help="demand per skill = supply ** this"
    )
    ap.add_argument("--mean-duration", type=float, default=300.0, help="seconds per task")
    ap.add_argument("--job-interval", type=float, default=60.0, help="simulated seconds")
    ap.add_argument("--fair-window", type=float, default=600.0, help="simulated seconds")
    ap.add_argument("--forecast-window", type=float, default=1800.0, help="simulated seconds")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--analyze-every", type=int, default=500, help="ANALYZE after this many completions"
    )
    ap.add_argument("--explain", action="store_true", help="EXPLAIN one claim half way")
    ap.add_argument(
        "--generic-plans",
        action="store_true",
        help="plan the claim once per connection (plan_cache_mode = force_generic_plan)",
    )
    ap.add_argument(
        "--policies",
        nargs="+",
        default=["taskroute", "priority-fifo"],
        choices=["taskroute", "priority-fifo", "taskroute-nojob"],
    )
    return ap.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
