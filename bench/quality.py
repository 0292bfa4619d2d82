"""Quality simulation: experts of known accuracy label items through the domain functions the
API uses (claim_next / submit on a real Postgres, so the real SQL rules decide), with gold,
pausing, retraction and relabelling. Each seed runs the same world twice, on the same answers:

- "today": the rule before issue 15 (pause after >= 5 gold answers with a Beta mean below 0.5;
  plain majority of redundancy 3 with adjudication);
- "new": the sequential pause test with adaptive gold shares, answers weighted by measured
  accuracy, dynamic overlap (2 answers to start, up to a cap of 5, until 98% confident);

and "plain majority" is computed from today's run: the first 3 answers of each item, no gold,
no pausing, no adjudication (ties: the first answer).

An expert's answer to an item is a function of (seed, expert, item) only, so whichever rule
runs, the same expert gives the same answer to the same item.

    PYTHONPATH=. python bench/quality.py [--seeds 20] [--items 2000] [--gold 100] [--rules new]

Needs a Postgres at $TASKROUTE_TEST_PG (default postgresql://postgres@127.0.0.1:5432/postgres);
it creates and drops a scratch database per run. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool
from taskroute.realtime import notify
from taskroute.resolvers import claims, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts import rules as accounts
from taskroute.resolvers.quality import policy, retraction

LABELS = ["cat", "dog", "bird", "fish"]
SKILL = "animals"
PAY = 10
ACCURACIES = [0.95, 0.92, 0.9, 0.9, 0.88, 0.85, 0.85, 0.8, 0.8, 0.75]
GOOD_BAR = 0.75  # experts at or above this accuracy should never be paused

RULES: dict[str, dict[str, Any]] = {
    "today": {
        "redundancy": 3,
        "policy": {"pause_rule": "fixed", "pause_min_gold": 5, "resolution": "majority"},
    },
    "new": {
        "redundancy": 5,  # the cap; items start with min_answers slots
        "policy": {
            "pause_rule": "sequential",
            "pause_min_gold": 3,
            "resolution": "weighted",
            "answer_choices": len(LABELS),
            "confidence_threshold": 0.98,
            "min_answers": 2,
        },
    },
}


@dataclass
class SimExpert:
    name: str
    accuracy: float
    id: uuid.UUID | None = None
    submitted: int = 0
    paused_after: int | None = None  # tasks submitted when the pause was noticed


@dataclass
class Outcome:
    paused_after: dict[str, int | None] = field(default_factory=dict)
    good_paused: int = 0
    accuracy: float = 0.0
    resolved: int = 0
    answers_per_item: float = 0.0
    gold_share: float = 0.0
    tasks_paid: int = 0
    seconds: float = 0.0


def answer(seed: int, e: SimExpert, n: int, truth: str) -> dict[str, Any]:
    """The answer this expert gives this item in every run of this seed."""
    rng = random.Random(f"{seed}/{e.name}/{n}")
    if rng.random() < e.accuracy:
        return {"label": truth}
    return {"label": rng.choice([x for x in LABELS if x != truth])}


def world() -> list[SimExpert]:
    return [SimExpert(f"good{i}", acc) for i, acc in enumerate(ACCURACIES)] + [
        SimExpert("bad-random", 0.25),
        SimExpert("bad-always-wrong", 0.0),
    ]


async def run_expert(db: Database, e: SimExpert, seed: int, truth: dict[int, str]) -> int:
    """Claim and submit until nothing is left for this expert; returns how many."""
    assert e.id is not None
    done = 0
    while True:
        claim = await claims.claim_next(db, e.id, None)
        if claim is None:
            break
        n = claim.task.payload["n"]
        await claims.submit(db, e.id, claim.assignment_id, answer(seed, e, n, truth[n]))
        e.submitted += 1
        done += 1
    status = await db.fetchval(
        "SELECT status FROM expert_skills WHERE expert_id = $1 AND skill = $2", e.id, SKILL
    )
    if status == "paused" and e.paused_after is None:
        e.paused_after = e.submitted
    return done


async def work(db: Database, experts: list[SimExpert], seed: int, truth: dict[int, str]) -> None:
    """Rounds of everyone working until a round finds no work: a submit may open a slot (dynamic
    overlap, adjudication) after some expert already ran dry (the service would wake them)."""
    while True:
        active = [e for e in experts if e.paused_after is None]
        done = await asyncio.gather(*(run_expert(db, e, seed, truth) for e in active))
        if not any(done):
            return


async def scratch(admin_dsn: str, fn: Any) -> Any:
    name = f"taskroute_bench_quality_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name
    try:
        await migrate_url(dsn)
        pool = await create_pool(dsn, 2, 12)
        try:
            return await fn(Database(pool, 30))
        finally:
            await pool.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def simulate(
    db: Database, args: argparse.Namespace, seed: int, rule: str
) -> tuple[Outcome, Outcome | None]:
    """One run of `rule`; for "today" also the plain-majority baseline on its answers."""
    rng = random.Random(seed)
    truth = {n: rng.choice(LABELS) for n in range(args.items + args.gold)}
    experts = world()
    for e in experts:
        e.id = (await accounts.create_expert(db, e.name, [{"skill": SKILL}])).id
    customer = await accounts.create_customer(db, "bench")
    gold = [
        {"skill": SKILL, "payload": {"n": n}, "gold": {"label": truth[n]}}
        for n in range(args.items, args.items + args.gold)
    ]
    items = [
        {"skill": SKILL, "payload": {"n": n}, "external_id": f"i{n}"} for n in range(args.items)
    ]
    spec = v.project_spec(
        {"name": "bench", "pay_cents": PAY, "redundancy": RULES[rule]["redundancy"], "tasks": gold},
        1_000_000,
        1_000_000,
    )
    project = (await projects.create_project(db, customer.id, spec)).project
    await policy.set_policy(
        db,
        project["id"],
        {"gold_ratio": args.gold_ratio, "answer_field": "label", **RULES[rule]["policy"]},
    )
    # The items after the policy: dynamic overlap decides how many slots an item starts with.
    item_specs = v.project_spec({"name": "x", "tasks": items}, 1_000_000, 1_000_000).tasks
    async with db.transaction() as conn:
        await projects.insert_tasks(conn, project["id"], item_specs, "open")
    notify.progress_changed(project["id"])

    started = time.perf_counter()
    await work(db, experts, seed, truth)
    # Retract the paused experts' labels; the others relabel.
    for e in experts:
        if e.paused_after is not None:
            assert e.id is not None
            await retraction.retract(db, e.id, SKILL, None, "bench", "paused", False)
    await work(db, experts, seed, truth)
    out = Outcome(seconds=time.perf_counter() - started)
    out.paused_after = {e.name: e.paused_after for e in experts if e.name.startswith("bad")}
    out.good_paused = sum(
        1 for e in experts if e.accuracy >= GOOD_BAR and e.paused_after is not None
    )
    out.accuracy, out.resolved = await accuracy(db, project["id"], truth)
    spend = await db.fetchrow(
        """SELECT count(*) FILTER (WHERE t.kind = 'gold') AS gold,
                  count(*) FILTER (WHERE t.kind <> 'gold') AS labels, count(*) AS total
           FROM payouts p JOIN assignments a ON a.id = p.assignment_id
           JOIN tasks t ON t.id = a.task_id WHERE p.kind = 'payment' AND p.project_id = $1""",
        project["id"],
    )
    out.tasks_paid = spend["total"]
    out.gold_share = spend["gold"] / spend["total"]
    out.answers_per_item = spend["labels"] / args.items
    if rule != "today":
        return out, None
    return out, await plain_majority(db, project["id"], truth, args.items)


async def plain_majority(
    db: Database, project_id: uuid.UUID, truth: dict[int, str], n_items: int
) -> Outcome:
    """Majority of each item's first 3 answers, as given: no gold, pausing or adjudication."""
    rows = await db.fetch(
        """SELECT i.payload, a.answer FROM assignments a
           JOIN tasks t ON t.id = a.task_id AND t.kind = 'normal'
           JOIN items i ON i.id = a.item_id
           WHERE a.project_id = $1 AND a.status = 'submitted'
           ORDER BY a.submitted_at, a.id""",
        project_id,
    )
    per_item: dict[int, list[str]] = {}
    for r in rows:
        per_item.setdefault(r["payload"]["n"], []).append(r["answer"]["label"])
    right = 0
    for n, labels in per_item.items():
        first3 = labels[:3]
        counts = Counter(first3)
        top = max(counts.values())
        pick = next(x for x in first3 if counts[x] == top)  # ties: the first answer
        right += pick == truth[n]
    out = Outcome(paused_after={}, resolved=len(per_item))
    out.accuracy = right / len(per_item) if per_item else 0.0
    out.answers_per_item = 3.0
    out.tasks_paid = 3 * n_items
    return out


async def accuracy(db: Database, project_id: uuid.UUID, truth: dict[int, str]) -> tuple[float, int]:
    rows = await db.fetch(
        """SELECT i.payload, r.answer FROM item_results r JOIN items i ON i.id = r.item_id
           WHERE r.project_id = $1 AND r.status = 'resolved'""",
        project_id,
    )
    right = sum(1 for r in rows if r["answer"]["label"] == truth[r["payload"]["n"]])
    return (right / len(rows) if rows else 0.0), len(rows)


def median_tasks(values: list[int | None]) -> str:
    """Median over seeds; a never-paused run counts as infinitely many tasks."""
    keyed = sorted(x if x is not None else float("inf") for x in values)
    m = statistics.median(keyed)
    never = sum(1 for x in values if x is None)
    text = "never" if m == float("inf") else f"{m:g}"
    return text + (f" ({never} never)" if never else "")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=7)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--gold", type=int, default=100)
    ap.add_argument("--gold-ratio", type=float, default=0.1)
    ap.add_argument(
        "--rules",
        default="today,new",
        help="which runs per seed, comma-separated (plain majority comes with today)",
    )
    args = ap.parse_args()
    rules = [r for r in args.rules.split(",") if r]
    if not rules or set(rules) - set(RULES):
        ap.error(f"--rules takes a comma-separated subset of {', '.join(RULES)}")
    admin_dsn = os.environ.get("TASKROUTE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

    results: dict[str, list[Outcome]] = {
        c: []
        for c in ("today", "plain majority", "new")
        if c in rules or (c == "plain majority" and "today" in rules)
    }
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for rule in rules:
            out, baseline = await scratch(
                admin_dsn, lambda db, rule=rule, seed=seed: simulate(db, args, seed, rule)
            )
            results[rule].append(out)
            if baseline is not None:
                results["plain majority"].append(baseline)
            print(
                f"seed {seed} {rule:5s}: accuracy {out.accuracy:.4f} ({out.resolved} resolved), "
                f"answers/item {out.answers_per_item:.2f}, gold {out.gold_share:.1%}, "
                f"paused after {out.paused_after}, good paused {out.good_paused}, "
                f"{out.tasks_paid} tasks paid, {out.seconds:.1f}s",
                flush=True,
            )

    print()
    print(
        f"{args.seeds} seeds from {args.first_seed}; {args.items} items, {args.gold} gold items, "
        f"gold ratio {args.gold_ratio}, 12 experts (accuracies {ACCURACIES}, 0.25, 0.0)"
    )
    cols = list(results)
    print(f"{'':44s}" + "".join(f"{c:>17s}" for c in cols))

    def row(label: str, fn: Any) -> None:
        print(f"{label:44s}" + "".join(f"{fn(c, results[c]):>17s}" for c in cols))

    def paused(who: str) -> Any:
        return lambda c, rs: (
            median_tasks([o.paused_after[who] for o in rs]) if c != ("plain majority") else "never"
        )

    row("median tasks until always-wrong paused", paused("bad-always-wrong"))
    row("median tasks until random paused", paused("bad-random"))
    row(
        f"experts >= {GOOD_BAR} accuracy ever paused (all runs)",
        lambda c, rs: str(sum(o.good_paused for o in rs)),
    )
    row(
        "final label accuracy (mean; min)",
        lambda c, rs: (
            f"{statistics.mean(o.accuracy for o in rs):.4f}; {min(o.accuracy for o in rs):.3f}"
        ),
    )
    row(
        "answers per item (mean)",
        lambda c, rs: f"{statistics.mean(o.answers_per_item for o in rs):.2f}",
    )
    row(
        "gold share of budget (mean)",
        lambda c, rs: f"{statistics.mean(o.gold_share for o in rs):.1%}",
    )
    row("tasks paid (mean)", lambda c, rs: f"{statistics.mean(o.tasks_paid for o in rs):.0f}")


if __name__ == "__main__":
    asyncio.run(main())
