"""GraphQL: `quote(input: CreateProjectInput)`, what a project would take if created now."""

from __future__ import annotations

from datetime import datetime

import strawberry

from taskroute.resolvers import quote as quotes
from taskroute.resolvers import validation as v

from .context import Context
from .inputs import CreateProjectInput, as_dict

Info = strawberry.Info[Context, None]


@strawberry.type(description="One skill of a quote: its slots against today's experts.")
class SkillQuote:
    skill: str
    items: int
    slots: int = strawberry.field(description="items x redundancy")
    present_experts: int = strawberry.field(
        description="present experts qualified for the skill and the project's min quality"
    )
    eta: datetime | None
    eta_early: datetime | None = strawberry.field(description="the 90% band's early end")
    eta_late: datetime | None = strawberry.field(description="the 90% band's late end")
    extra_experts_needed: int | None = strawberry.field(
        description="experts at the skill's typical pace to add to meet the deadline (0: none"
        " needed; null: no deadline, or no pace measured for the skill)"
    )
    reason: str | None = strawberry.field(description="why the ETA is unknown or late")


@strawberry.type(
    description="What a project would take if it were created now: nothing is written."
    " Time from the deadline forecast (today's present experts and their measured pace, next"
    " to every active project's work); cost is pay x the answers the batch needs."
)
class Quote:
    items: int = strawberry.field(description="items with work (gold items excluded)")
    gold_items: int
    slots: int
    deadline: datetime | None
    eta: datetime | None
    eta_early: datetime | None
    eta_late: datetime | None
    meets_deadline: bool = strawberry.field(
        description="the ETA is at or before the deadline (true without a deadline)"
    )
    by_skill: list[SkillQuote]
    expected_gold_answers: float = strawberry.field(
        description="gold servings among the slots (a new project's default gold share; 0"
        " when the batch brings no gold items)"
    )
    expected_adjudications: float = strawberry.field(
        description="items x the share of this customer's resolved items that were"
        " adjudicated (0 at redundancy 1)"
    )
    pay_cents: int
    base_cost_cents: int = strawberry.field(description="pay x slots")
    gold_cost_cents: int
    adjudication_cost_cents: int
    expected_cost_cents: int = strawberry.field(description="base + gold + adjudication")

    @staticmethod
    def of(q: quotes.Quote) -> Quote:
        return Quote(
            items=q.items,
            gold_items=q.gold_items,
            slots=q.slots,
            deadline=q.deadline,
            eta=q.eta,
            eta_early=q.eta_early,
            eta_late=q.eta_late,
            meets_deadline=q.on_track,
            by_skill=[
                SkillQuote(
                    skill=s.skill,
                    items=s.items,
                    slots=s.slots,
                    present_experts=s.present_experts,
                    eta=s.eta,
                    eta_early=s.eta_early,
                    eta_late=s.eta_late,
                    extra_experts_needed=s.extra_experts,
                    reason=s.reason,
                )
                for s in q.by_skill
            ],
            expected_gold_answers=q.expected_gold_answers,
            expected_adjudications=q.expected_adjudications,
            pay_cents=q.pay_cents,
            base_cost_cents=q.base_cost_cents,
            gold_cost_cents=q.gold_cost_cents,
            adjudication_cost_cents=q.adjudication_cost_cents,
            expected_cost_cents=q.expected_cost_cents,
        )


@strawberry.type
class QuotesQuery:
    @strawberry.field(
        description="What createProject with this input would take (ETA band, deadline"
        " verdict, extra experts per skill, expected cost); the same checks and errors as"
        " createProject, and nothing is written."
    )
    async def quote(self, info: Info, input: CreateProjectInput) -> Quote:
        customer_id = (await info.context.viewer()).require_customer()
        settings = info.context.settings
        spec = v.project_spec(
            as_dict(input), settings.max_tasks_per_request, settings.max_payload_bytes
        )
        return Quote.of(await quotes.quote(info.context.db, settings, customer_id, spec))
