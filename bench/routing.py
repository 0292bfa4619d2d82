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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from routing_worlds import (  # noqa: E402  (bench/ is the script's folder)
    CLASSES,
    WORLDS,
    World,
    WorldSpec,
    assign_deadlines,
    build_world,
    custom_spec,
    lower_bound,
)

from taskroute.db.migrate import migrate_url  # noqa: E402
from taskroute.db.pool import Database, create_pool  # noqa: E402
from taskroute.db.queries import Q, load  # noqa: E402
from taskroute.resolvers.jobs.routing import (  # noqa: E402
    RoutingPolicy,
    parse_class_shares,
    routing_once,
)
from taskroute.resolvers.jobs.task_counts import compact_once  # noqa: E402

BQ = load(Path(__file__).parent / "sql")


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
            records=[(e, s, 1.0) for e in world.experts for s in world.expert_skills[e]],
            columns=["expert_id", "skill", "starting_quality"],
        )
        await conn.copy_records_to_table(
            "projects",
            records=[
                (
                    p.id,
                    customer,
                    f"p{i}-{p.cls}",
                    p.priority,
                    base + timedelta(seconds=p.deadline) if p.deadline < math.inf else None,
                    7 * 86400,
                    # simulated experts never leave mid-task and send no heartbeats: presence
                    # from the heartbeat (presence_overdue) must not count them gone
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
                "heartbeat_timeout_seconds",
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
        class_shares=parse_class_shares(args.class_shares),
        project_share=args.project_share,
        forecast_window=args.forecast_window,
        active_window=1e9,
        scarcity_ratio=args.scarcity_ratio,
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
                # The server folds task-count deltas every second (what forecasts read).
                await compact_once(db)
                report = await routing_once(db, routing, ts(now))
                out.job_wall += time.monotonic() - t0
                out.jobs += 1
                out.bumps += len(report.bumps)
                out.boosted += report.boosted + report.lifted
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


def figures(world: World, out: Outcome) -> dict[str, Any]:
    makespan = max(out.finished.values())
    per_class: dict[str, list[float]] = defaultdict(list)
    class_end: dict[str, float] = defaultdict(float)
    class_waits: dict[str, list[float]] = defaultdict(list)
    for t, done in out.finished.items():
        p = world.projects[world.project_of[t]]
        per_class[p.cls].append(done - p.release)
        class_end[p.cls] = max(class_end[p.cls], done)
        class_waits[p.cls].append(out.claimed[t] - p.release)
    rare_done = [out.finished[t] for t in range(len(world.item)) if world.skill_of[t] in world.rare]
    met = 0
    for p in world.projects:
        end = max(out.finished[t] for t in p.tasks)
        met += end <= p.deadline < math.inf  # projects without a deadline are not counted
    return {
        "makespan": makespan,
        "classes": {
            c: (float(np.mean(v)), float(np.percentile(v, 95)), class_end[c])
            for c, v in sorted(per_class.items())
        },
        "p95_wait": {c: float(np.percentile(v, 95)) for c, v in class_waits.items()},
        "rare_drain": max(rare_done) if rare_done else 0.0,
        "worst_wait": max(w for v in class_waits.values() for w in v),
        "deadlines": (met, sum(p.deadline < math.inf for p in world.projects)),
    }


def hours(s: float) -> str:
    return f"{s / 3600:6.2f} h"


def report(world: World, bound: float, results: list[tuple[Outcome, dict[str, Any]]]) -> None:
    rare_tasks = sum(1 for s in world.skill_of if s in world.rare)
    print(
        f"\nworld: {len(world.experts)} experts, {len(world.item)} tasks, {len(world.skills)} "
        f"skills ({len(world.rare)} rare, {rare_tasks} rare-skill tasks), "
        f"{len(world.projects)} projects "
        + str({c: sum(p.cls == c for p in world.projects) for c in CLASSES})
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
        print(
            "  p95 wait (claim - release) "
            + "  ".join(f"{c} {hours(f['p95_wait'][c])}" for c in CLASSES if c in f["p95_wait"])
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


# --- running worlds -----------------------------------------------------------------------


async def run_world(
    args: argparse.Namespace, spec: WorldSpec, seed: int, policies: list[str]
) -> tuple[World, float, list[tuple[Outcome, dict[str, Any]]]]:
    """Build one (world, seed), load it once, and simulate each policy on its own copy."""
    world = build_world(spec, seed)
    bound = lower_bound(world)
    assign_deadlines(world, spec, bound, seed)
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    tag = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
    template = f"taskroute_bench_{tag}"
    admin = await asyncpg.connect(args.dsn)
    made = [template]
    results = []
    try:
        await admin.execute(f'CREATE DATABASE "{template}"')
        await migrate_url(dsn_for(args.dsn, template))
        await load_world(dsn_for(args.dsn, template), world, base)
        for policy in policies:
            name = f"taskroute_bench_{tag}_{policy.replace('-', '_')}"
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            made.append(name)
            out = await simulate(dsn_for(args.dsn, name), world, base, policy, args)
            results.append((out, figures(world, out)))
    finally:
        for name in reversed(made):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return world, bound, results


# Columns of the per-world table: (label, how to read it off one run, True if higher is better)
COLUMNS: list[tuple[str, Callable[[dict[str, Any], float], float], bool]] = [
    ("makespan / LP bound", lambda f, b: f["makespan"] / b, False),
    ("deadlines met", lambda f, b: float(f["deadlines"][0]), True),
    ("rare-skill drain (h)", lambda f, b: f["rare_drain"] / 3600, False),
    ("p95 wait high (h)", lambda f, b: f["p95_wait"].get("high", 0.0) / 3600, False),
    ("p95 wait normal (h)", lambda f, b: f["p95_wait"].get("normal", 0.0) / 3600, False),
    ("p95 wait low (h)", lambda f, b: f["p95_wait"].get("low", 0.0) / 3600, False),
    ("longest wait (h)", lambda f, b: f["worst_wait"] / 3600, False),
]
# Medians are compared as printed: equal at this precision is a tie, not a loss.
PRECISION = 2
MAKESPAN_TARGET = 1.02


def verdict(ours: float, theirs: float, higher_better: bool, precision: int = PRECISION) -> str:
    a, b = round(ours, precision), round(theirs, precision)
    if a == b:
        return "same"
    return "better" if (a > b) == higher_better else "WORSE"


def world_table(
    spec: WorldSpec, seeds: list[int], runs: list[tuple[World, float, list[Any]]]
) -> dict[str, str]:
    """Print one world's table (medians over seeds) and return the verdict per column."""
    n_projects = sorted({len(w.projects) for w, _, _ in runs})
    n_tasks = int(np.median([len(w.item) for w, _, _ in runs]))
    print(
        f"\n== world {spec.name}: {spec.about}\n"
        f"   {spec.experts} experts, ~{n_tasks} tasks, {spec.skills} skills, "
        f"{'/'.join(map(str, n_projects))} projects; medians over seeds "
        f"{', '.join(map(str, seeds))}"
    )
    policies = [out.policy for out, _ in runs[0][2]]
    header = f"   {'':<22}" + "".join(f"{p:>15}" for p in policies)
    print(
        header
        + ("   taskroute vs priority-fifo   seeds better/worse" if len(policies) == 2 else "")
    )
    verdicts: dict[str, str] = {}
    for label, read, higher_better in COLUMNS:
        values = [
            [read(results[i][1], bound) for _, bound, results in runs] for i in range(len(policies))
        ]
        medians = [float(np.median(v)) for v in values]
        line = f"   {label:<22}" + "".join(f"{m:>15.{PRECISION}f}" for m in medians)
        if len(policies) == 2:
            verdicts[label] = verdict(medians[0], medians[1], higher_better)
            # The same comparison seed by seed (each seed is one world run by both policies):
            # a median over a few seeds can turn on one seed; the pairs say which way they lean
            # (at the per-seed lines' precision).
            paired = [verdict(a, b, higher_better, 3) for a, b in zip(*values, strict=True)]
            line += f"   {verdicts[label]:<26}{paired.count('better'):>2}/{paired.count('WORSE')}"
        print(line)
    per_seed = [
        " ".join(f"{results[i][1]['deadlines'][0]}" for _, _, results in runs)
        for i in range(len(policies))
    ]
    print(
        "   deadlines met per seed: "
        + "; ".join(f"{p} {s}" for p, s in zip(policies, per_seed, strict=True))
    )
    jobs = [results[0][0] for _, _, results in runs]
    print(
        f"   taskroute routing job: bumps {sum(o.bumps for o in jobs)}, "
        f"boosted or lifted {sum(o.boosted for o in jobs)} over all seeds"
    )
    return verdicts


async def run_worlds(args: argparse.Namespace) -> None:
    names = list(WORLDS) if args.worlds == ["all"] else args.worlds
    seeds = [args.seed + i for i in range(args.seeds)]
    policies = args.policies
    print(
        f"bench/routing.py --worlds {' '.join(args.worlds)} --seeds {args.seeds}: policies "
        f"{', '.join(policies)}; routing job every {args.job_interval:.0f} s, fairness window "
        f"{args.fair_window:.0f} s (simulated time)"
    )
    # (world, seed) runs are independent (each on its own databases, on simulated time), so
    # --jobs of them may run at once: the figures are the same, only the wall clock shrinks.
    gate = asyncio.Semaphore(args.jobs)

    async def one(name: str, seed: int) -> tuple[World, float, list[Any]]:
        async with gate:
            t0 = time.monotonic()
            run = await run_world(args, WORLDS[name], seed, policies)
            walls = ", ".join(
                f"{o.policy} {o.wall:.0f} s (routing jobs {o.job_wall:.0f} s)" for o, _ in run[2]
            )
            print(f"   [{name} seed {seed}: {time.monotonic() - t0:.0f} s wall; {walls}]")
            # per (world, seed), so a run cut short still shows what it measured
            print(
                f"   [{name} seed {seed}: "
                + "; ".join(
                    f"{o.policy} makespan {f['makespan'] / run[1]:.3f} x bound, deadlines "
                    f"{f['deadlines'][0]}, rare drain {f['rare_drain'] / 3600:.2f} h, p95 wait "
                    + "/".join(f"{f['p95_wait'].get(c, 0.0) / 3600:.2f}" for c in CLASSES)
                    + " h"
                    for o, f in run[2]
                )
                + "]"
            )
            return run

    done = await asyncio.gather(*(one(name, seed) for name in names for seed in seeds))
    summary = []
    for i, name in enumerate(names):
        spec = WORLDS[name]
        runs = list(done[i * len(seeds) : (i + 1) * len(seeds)])
        verdicts = world_table(spec, seeds, runs)
        if verdicts:
            ratio = float(np.median([r[2][0][1]["makespan"] / r[1] for r in runs]))
            summary.append((name, verdicts, ratio))
    if summary:
        print(
            "\n== targets: taskroute no worse than priority-fifo on any column, better on "
            f"deadlines met in >= 2 worlds, makespan within {MAKESPAN_TARGET} x LP bound"
        )
        better = 0
        for name, verdicts, ratio in summary:
            worse = [k for k, v in verdicts.items() if v == "WORSE"]
            better += verdicts["deadlines met"] == "better"
            print(
                f"   {name:<12} deadlines {verdicts['deadlines met']:<6}  "
                f"makespan {ratio:.3f} x bound ({'ok' if ratio <= MAKESPAN_TARGET else 'MISSED'})"
                f"  worse on: {', '.join(worse) if worse else 'nothing'}"
            )
        print(f"   better on deadlines met in {better} of {len(summary)} worlds")


async def main(args: argparse.Namespace) -> None:
    if args.worlds:
        await run_worlds(args)
        return
    t0 = time.monotonic()
    spec = custom_spec(
        args.experts,
        args.tasks,
        args.skills,
        args.projects,
        zipf=args.zipf,
        demand_exp=args.demand_exp,
        mean_duration=args.mean_duration,
    )
    world, bound, results = await run_world(args, spec, args.seed, args.policies)
    for out, _ in results:
        print(f"{out.policy}: simulated in {out.wall:.0f} s", flush=True)
    print(f"world built, bound solved and simulated in {time.monotonic() - t0:.1f} s")
    report(world, bound, results)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dsn",
        default=os.environ.get(
            "TASKROUTE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    ap.add_argument(
        "--worlds",
        nargs="+",
        choices=["all", *WORLDS],
        help="run these worlds (see bench/routing_worlds.py) at their own sizes, over --seeds "
        "seeds, and print a table per world; without it: one default world at the size below",
    )
    ap.add_argument("--seeds", type=int, default=5, help="with --worlds: seeds --seed, +1, ...")
    ap.add_argument("--jobs", type=int, default=1, help="with --worlds: (world, seed) runs at once")
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
    ap.add_argument(
        "--class-shares",
        default="high=0.5,normal=0.25,low=0.1",
        help="the fairness shares (TASKROUTE_ROUTING_CLASS_SHARES)",
    )
    ap.add_argument(
        "--project-share",
        type=float,
        default=0.2,
        help="least share of a class's claims its projects split (TASKROUTE_ROUTING_PROJECT_SHARE)",
    )
    ap.add_argument(
        "--scarcity-ratio",
        type=float,
        default=0.5,
        help="TASKROUTE_ROUTING_SCARCITY_RATIO",
    )
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
    args = ap.parse_args(argv)
    if args.worlds and "all" in args.worlds and len(args.worlds) > 1:
        ap.error("--worlds all stands alone")
    return args


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]  # progress
    asyncio.run(main(parse_args()))
