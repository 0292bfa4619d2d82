"""A quote before committing: what a project would take (time, experts, money) if it were
created now, from the same checked spec createProject takes. Writes nothing.

Time comes from the deadline forecast (forecast/: today's present experts, their measured
pace, and the work every active project already has), run on the batch's slots as if they
had just been opened. Cost is pay per answer x the answers the batch will need: its slots
(items x redundancy), the gold a new project serves among them (only when the batch brings
gold items: the project's default quality policy's steady gold share), and the adjudications
its customer's past items needed (the share of their resolved items that were adjudicated).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers import forecast
from taskroute.resolvers.validation import ProjectSpec


@dataclass(frozen=True)
class SkillQuote:
    skill: str
    items: int
    slots: int
    present_experts: int
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    extra_experts: int | None
    reason: str | None


@dataclass(frozen=True)
class Quote:
    items: int
    gold_items: int
    slots: int
    deadline: datetime | None
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    on_track: bool
    by_skill: list[SkillQuote]
    expected_gold_answers: float
    expected_adjudications: float
    pay_cents: int
    base_cost_cents: int
    gold_cost_cents: int
    adjudication_cost_cents: int
    expected_cost_cents: int


async def quote(db: Database, settings: Settings, customer_id: UUID, spec: ProjectSpec) -> Quote:
    work = [t for t in spec.tasks if t.gold is None]
    gold_items = len(spec.tasks) - len(work)
    items = Counter(t.skill for t in work)
    slots = {(k, spec.min_quality): n * spec.redundancy for k, n in items.items()}
    async with db.snapshot() as snap:  # read-only: a quote cannot write
        fc = await forecast.quote_forecast(snap.conn, settings, spec.deadline, slots)
        defaults = await _policy_defaults(snap.conn)
        rate = await snap.conn.fetchval(Q["quote_adjudication_rate"], customer_id) or 0.0
    total_slots = sum(slots.values())
    gold_share = float(defaults["gold_ratio"]) if gold_items else 0.0
    # a share g of claims is gold: g / (1 - g) gold answers per real one
    gold_answers = total_slots * gold_share / (1 - gold_share) if gold_share < 1 else 0.0
    adjudicates = spec.redundancy > 1 and defaults["adjudicate"] == "true"
    adjudications = sum(items.values()) * float(rate) if adjudicates else 0.0
    base = spec.pay_cents * total_slots
    gold_cost = round(spec.pay_cents * gold_answers)
    adj_cost = round(spec.pay_cents * adjudications)
    return Quote(
        items=sum(items.values()),
        gold_items=gold_items,
        slots=total_slots,
        deadline=spec.deadline,
        eta=fc.eta,
        eta_early=fc.eta_early,
        eta_late=fc.eta_late,
        on_track=fc.on_track,
        by_skill=[
            SkillQuote(
                skill=s.skill,
                items=items[s.skill],
                slots=s.total,
                present_experts=s.active_experts,
                eta=s.eta,
                eta_early=s.eta_early,
                eta_late=s.eta_late,
                extra_experts=s.extra_experts,
                reason=s.reason,
            )
            for s in fc.by_skill
        ],
        expected_gold_answers=gold_answers,
        expected_adjudications=adjudications,
        pay_cents=spec.pay_cents,
        base_cost_cents=base,
        gold_cost_cents=gold_cost,
        adjudication_cost_cents=adj_cost,
        expected_cost_cents=base + gold_cost + adj_cost,
    )


async def _policy_defaults(conn: asyncpg.Connection) -> dict[str, str]:
    """The quality policy a new project starts with: the table's column defaults (one place
    says them: the schema)."""
    rows = await conn.fetch(Q["quality_policy_defaults"])
    return {r["column_name"]: str(r["value"]).lower() for r in rows}
