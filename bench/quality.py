"""Quality simulation: experts of known accuracy label a few thousand items through the domain
functions the API uses (claim_next / submit on a real Postgres), with gold, agreement,
adjudication, pausing and retraction. Prints the final label accuracy against the truth, the
share of the budget spent on gold, and how many tasks it took to pause the bad experts.

    PYTHONPATH=. python bench/quality.py [--items 2000] [--redundancy 3] [--gold 100]

Needs a Postgres at $TASKROUTE_TEST_PG (default postgresql://postgres@127.0.0.1:5432/postgres);
it creates and drops a scratch database. Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool
from taskroute.resolvers import accounts, claims, projects, quality
from taskroute.resolvers import validation as v

LABELS = ["cat", "dog", "bird", "fish"]
SKILL = "animals"
PAY = 10


@dataclass
class SimExpert:
    name: str
    accuracy: float
    id: uuid.UUID | None = None
    submitted: int = 0
    paused_after: int | None = None  # tasks submitted when the pause was noticed
    kinds: list[str] = field(default_factory=list)


def answer(truth: str, accuracy: float, rng: random.Random) -> dict[str, Any]:
    if rng.random() < accuracy:
        return {"label": truth}
    return {"label": rng.choice([x for x in LABELS if x != truth])}


async def run_expert(db: Database, e: SimExpert, truth: dict[int, str], rng: random.Random) -> None:
    assert e.id is not None
    while True:
        claim = await claims.claim_next(db, e.id, None)
        if claim is None:
            break
        n = claim.task.payload["n"]
        await claims.submit(db, e.id, claim.assignment_id, answer(truth[n], e.accuracy, rng))
        e.submitted += 1
    status = await db.fetchval(
        "SELECT status FROM expert_skills WHERE expert_id = $1 AND skill = $2", e.id, SKILL
    )
    if status == "paused" and e.paused_after is None:
        e.paused_after = e.submitted


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--redundancy", type=int, default=3)
    ap.add_argument("--gold", type=int, default=100)
    ap.add_argument("--gold-ratio", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    admin_dsn = os.environ.get("TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"taskroute_bench_quality_{os.getpid()}"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name
    try:
        await migrate_url(dsn)
        pool = await create_pool(dsn, 2, 12)
        db = Database(pool, 30)
        try:
            await simulate(db, args, rng)
        finally:
            await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def simulate(db: Database, args: argparse.Namespace, rng: random.Random) -> None:
    experts = [
        SimExpert(f"good{i}", acc)
        for i, acc in enumerate([0.95, 0.92, 0.9, 0.9, 0.88, 0.85, 0.85, 0.8, 0.8, 0.75])
    ] + [SimExpert("bad-random", 0.25), SimExpert("bad-always-wrong", 0.0)]
    for e in experts:
        e.id = (await accounts.create_expert(db, e.name, [{"skill": SKILL}])).id
    customer = await accounts.create_customer(db, "bench")

    truth = {n: rng.choice(LABELS) for n in range(args.items + args.gold)}
    tasks = [
        {"skill": SKILL, "payload": {"n": n}, "external_id": f"i{n}"} for n in range(args.items)
    ] + [
        {"skill": SKILL, "payload": {"n": n}, "gold": {"label": truth[n]}}
        for n in range(args.items, args.items + args.gold)
    ]
    spec = v.project_spec(
        {"name": "bench", "pay_cents": PAY, "redundancy": args.redundancy, "tasks": tasks},
        1_000_000,
        1_000_000,
    )
    project = (await projects.create_project(db, customer.id, spec)).project
    policy = await quality.set_policy(
        db,
        project["id"],
        {"gold_ratio": args.gold_ratio, "answer_field": "label", "pause_min_gold": 5},
    )

    started = time.perf_counter()
    await asyncio.gather(*(run_expert(db, e, truth, rng) for e in experts))
    first_pass = await accuracy(db, project["id"], truth)

    # Retract the paused experts' labels; the others relabel.
    retracted = 0
    for e in experts:
        if e.paused_after is not None:
            assert e.id is not None
            done = await quality.retract(db, e.id, SKILL, None, "bench", "paused", False)
            retracted += done.answers
    await asyncio.gather(
        *(run_expert(db, e, truth, rng) for e in experts if e.paused_after is None)
    )
    elapsed = time.perf_counter() - started
    final = await accuracy(db, project["id"], truth)

    spend = await db.fetchrow(
        """SELECT sum(p.amount_cents) FILTER (WHERE t.kind = 'gold') AS gold,
                  sum(p.amount_cents) FILTER (WHERE t.kind = 'adjudication') AS adjudication,
                  sum(p.amount_cents) AS total,
                  count(*) AS tasks
           FROM payouts p JOIN assignments a ON a.id = p.assignment_id
           JOIN tasks t ON t.id = a.task_id WHERE p.kind = 'payment'"""
    )
    report = await quality.report(db, project["id"])
    # Majority-of-k with no gold, pausing or adjudication, on the same answers: the baseline.
    print(
        f"items {args.items}, redundancy {args.redundancy}, gold items {args.gold}, "
        f"gold ratio {policy['gold_ratio']:.2f} (onboarding {policy['exploration_gold_ratio']:.2f}"
        f" for the first {policy['exploration_tasks']} tasks), {len(experts)} experts"
    )
    print(f"simulated in {elapsed:.1f}s, {spend['tasks']} tasks paid")
    print(
        f"label accuracy vs truth, before retraction: {first_pass[0]:.4f} "
        f"({first_pass[1]} resolved)"
    )
    print(
        f"label accuracy vs truth, final:             {final[0]:.4f} "
        f"({final[1]} of {args.items} resolved; {retracted} answers retracted and relabelled)"
    )
    print(
        f"budget on gold: {spend['gold'] / spend['total']:.2%} "
        f"(adjudication {(spend['adjudication'] or 0) / spend['total']:.2%})"
    )
    print(
        f"adjudicated items: {report['adjudicated']}, mean agreement "
        f"{report['mean_agreement']:.3f}, Krippendorff alpha {report['krippendorff_alpha']:.3f}"
    )
    for e in experts:
        assert e.id is not None
        s = await db.fetchrow(
            "SELECT * FROM expert_skills WHERE expert_id = $1 AND skill = $2", e.id, SKILL
        )
        when = (
            f"PAUSED after {e.paused_after} tasks ({s['gold_seen']} gold)"
            if e.paused_after is not None
            else "active"
        )
        print(
            f"  {e.name:17s} accuracy {e.accuracy:.2f}  estimate {s['quality']:.3f} "
            f"gold {s['gold_correct']}/{s['gold_seen']}  tasks {s['tasks_done']:5d}  {when}"
        )


async def accuracy(db: Database, project_id: uuid.UUID, truth: dict[int, str]) -> tuple[float, int]:
    rows = await db.fetch(
        """SELECT i.payload, r.answer FROM item_results r JOIN items i ON i.id = r.item_id
           WHERE r.project_id = $1 AND r.status = 'resolved'""",
        project_id,
    )
    right = sum(1 for r in rows if r["answer"]["label"] == truth[r["payload"]["n"]])
    return (right / len(rows) if rows else 0.0), len(rows)


if __name__ == "__main__":
    asyncio.run(main())
