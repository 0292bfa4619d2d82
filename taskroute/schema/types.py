"""GraphQL output types. Field names are the public contract."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.scalars import JSON

from taskroute.resolvers import claims, ingest, instructions, projects
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.accounts.rules import Credential as CredentialRow
from taskroute.resolvers.quality import adjudication
from taskroute.resolvers.validation import priority_class_of

from . import burndown, project_views
from .batch_types import Ingest
from .context import Context
from .inputs import Layout
from .instructions import (
    Instructions,
    TaskInstructions,
    project_instructions,
    project_instructions_history,
)
from .routing_types import PriorityClass, ProjectRouting


@strawberry.type
class Credential:
    id: strawberry.ID
    token: str

    @classmethod
    def of(cls, c: CredentialRow) -> Credential:
        return cls(id=strawberry.ID(str(c.id)), token=c.token)


@strawberry.type(description="The answer a review task reviews.")
class ReviewOf:
    answer: JSON
    candidate_order: str | None = strawberry.field(
        default=None, description="PAIRWISE: the order its expert saw ('ab' | 'ba')."
    )


@strawberry.type
class Task:
    id: strawberry.ID
    project_id: strawberry.ID
    skill: str
    priority: int
    payload: JSON | None
    # For payloads too large to travel inline: GET it (expert's bearer token) while the lease
    # lives; it expires after a few minutes (claim again for a fresh one).
    payload_url: str | None = None
    answer_schema: JSON | None = strawberry.field(
        default=None,
        description="JSON Schema the answer must match (the item's, else the project's);"
        " null: any JSON.",
    )

    layout: Layout = strawberry.field(
        default=Layout.GENERIC,
        description="How the workbench presents the task (the project's layout).",
    )
    candidate_keys: list[str] | None = strawberry.field(
        default=None, description="PAIRWISE: the payload keys of candidates a and b."
    )
    candidate_order: str | None = strawberry.field(
        default=None,
        description="PAIRWISE: 'ab' (a on the left) or 'ba' (b on the left), drawn per"
        " assignment and recorded; answers always name candidates a / b.",
    )
    review_of: ReviewOf | None = strawberry.field(
        default=None,
        description="Review tasks only: the answer under review (answerSchema then says what"
        " a correction must be).",
    )
    instructions_version: strawberry.Private[int | None] = None

    @strawberry.field(
        description="The project's instructions (Markdown) this claim was given under; null:"
        " none. Read only when asked for, and cached (versions never change)."
    )
    async def instructions(self, info: strawberry.Info[Context, None]) -> TaskInstructions | None:
        found = await instructions.get(
            info.context.db, parse_id(self.project_id), self.instructions_version
        )
        return None if found is None else TaskInstructions.of(found)

    @strawberry.field(description="Adjudication tasks only: the answers to decide between.")
    async def prior_answers(self, info: strawberry.Info[Context, None]) -> list[JSON] | None:
        viewer = await info.context.viewer()
        if viewer.expert_id is None:
            return None
        return await adjudication.prior_answers(
            info.context.db, viewer.expert_id, parse_id(self.id)
        )


@strawberry.type
class Claim:
    assignment_id: strawberry.ID
    lease_until: datetime
    task: Task

    @classmethod
    def of(cls, c: claims.Claim) -> Claim:
        t = c.task
        return cls(
            assignment_id=strawberry.ID(str(c.assignment_id)),
            lease_until=c.lease_until,
            task=Task(
                id=strawberry.ID(str(t.id)),
                project_id=strawberry.ID(str(t.project_id)),
                skill=t.skill,
                priority=t.priority,
                payload=t.payload,
                payload_url=t.payload_url,
                answer_schema=t.answer_schema,
                layout=Layout(t.layout),
                candidate_keys=list(t.candidate_keys) if t.candidate_keys else None,
                candidate_order=t.candidate_order,
                review_of=None
                if t.review_of is None
                else ReviewOf(
                    answer=t.review_of.answer, candidate_order=t.review_of.candidate_order
                ),
                instructions_version=t.instructions_version,
            ),
        )


@strawberry.type
class Lease:
    assignment_id: strawberry.ID
    lease_until: datetime
    has_high_priority_tasks: bool

    @classmethod
    def of(cls, lease: claims.Lease) -> Lease:
        return cls(
            assignment_id=strawberry.ID(str(lease.assignment_id)),
            lease_until=lease.lease_until,
            has_high_priority_tasks=lease.has_high_priority_tasks,
        )


@strawberry.type
class Receipt:
    id: strawberry.ID
    assignment_id: strawberry.ID
    submitted_at: datetime
    pay_cents: int
    pay_status: str = strawberry.field(
        description="What happens to the pay: 'paid' (on_submit), 'pending_review'"
        " (on_review), 'pending_resolution' (on_acceptance)."
    )
    duplicate: bool = strawberry.field(
        default=False, description="a repeated submit: this is the first answer's receipt"
    )
    answer_differs: bool = strawberry.field(
        default=False,
        description="a repeated submit whose answer differs from the stored one: the first"
        " answer stands, this one was not stored",
    )

    @classmethod
    def of(cls, r: claims.Receipt) -> Receipt:
        return cls(
            id=strawberry.ID(str(r.id)),
            assignment_id=strawberry.ID(str(r.assignment_id)),
            submitted_at=r.submitted_at,
            pay_cents=r.pay_cents,
            pay_status=r.pay_status,
            duplicate=r.duplicate,
            answer_differs=r.answer_differs,
        )


@strawberry.type
class Progress:
    status: str = strawberry.field(
        description="the project's status in the same snapshot as the counts: 'ingesting' | "
        "'active' | 'completed' (all work resolved) | 'canceled'"
    )
    completed_at: datetime | None = strawberry.field(
        description="when the project last became completed; null otherwise"
    )
    total: int
    open: int
    claimed: int
    done: int
    failed: int
    canceled: int


@strawberry.type
class Project:
    id: strawberry.ID
    name: str
    status: str = strawberry.field(
        description="'ingesting' (a large batch is being stored) | 'active' | 'completed' (every "
        "task slot is done or failed and no batch is queued; active again when work is added "
        "or labels are retracted) | 'canceled'"
    )
    completed_at: datetime | None = strawberry.field(
        description="when the project last became completed; null while it is not"
    )
    priority: int
    deadline: datetime | None
    lease_seconds: int
    heartbeat_timeout_seconds: int
    pay_cents: int
    min_quality: float
    redundancy: int
    created_at: datetime
    answer_schema: JSON | None = strawberry.field(
        description="JSON Schema every answer must match (items may carry their own)."
    )
    payment_policy: str = strawberry.field(
        description="'on_submit' | 'on_acceptance' | 'on_review' (docs/quality-and-payment.md)."
    )
    auto_approve_seconds: int
    override_seconds: int
    pay_adjudicated_disagreements: bool
    flag_after_bad_item_releases: int = strawberry.field(
        description="BAD_ITEM releases by this many experts flag an item"
    )
    max_items_per_expert: int | None = strawberry.field(
        description="no expert answers more of the project's items (null: any)"
    )
    min_seconds_per_task: int | None = strawberry.field(
        description="answers sooner than this after the claim are flagged tooFast (null: none)",
    )
    too_fast_policy: str = strawberry.field(
        description="'count': a tooFast answer counts like any; 'exclude': never paid"
        " automatically (waits for review) and scored as wrong on gold",
    )
    layout: Layout = strawberry.field(description="How the workbench presents the tasks.")
    candidate_keys: list[str] | None = strawberry.field(
        description="PAIRWISE: the payload keys of candidates a and b (null: a, b)."
    )
    expert_review: bool = strawberry.field(
        description="on_review: answers are reviewed by experts holding review:<skill>."
    )
    review_pay_cents: int
    pay_corrected: bool
    payload_retention_seconds: int = strawberry.field(
        description="Payloads are deleted this long after the project ends (docs/operations.md)."
    )
    payloads_deleted_at: datetime | None = strawberry.field(
        description="When retention last deleted the project's payloads (null: never). A"
        " completed project that gets new work keeps the new payloads until it ends again."
    )

    @classmethod
    def of(cls, row: Any) -> Project:
        return cls(
            id=strawberry.ID(str(row["id"])),
            name=row["name"],
            status=row["status"],
            completed_at=row["completed_at"],
            priority=row["priority"],
            deadline=row["deadline"],
            lease_seconds=row["lease_seconds"],
            heartbeat_timeout_seconds=row["heartbeat_timeout_seconds"],
            pay_cents=row["pay_cents"],
            min_quality=row["min_quality"],
            redundancy=row["redundancy"],
            created_at=row["created_at"],
            answer_schema=row["answer_schema"],
            payment_policy=row["payment_policy"],
            auto_approve_seconds=row["auto_approve_seconds"],
            override_seconds=row["override_seconds"],
            pay_adjudicated_disagreements=row["pay_adjudicated_disagreements"],
            flag_after_bad_item_releases=row["flag_after_bad_item_releases"],
            max_items_per_expert=row["max_items_per_expert"],
            min_seconds_per_task=row["min_seconds_per_task"],
            too_fast_policy=row["too_fast_policy"],
            layout=Layout(row["layout"]),
            candidate_keys=row["candidate_keys"],
            expert_review=row["expert_review"],
            review_pay_cents=row["review_pay_cents"],
            pay_corrected=row["pay_corrected"],
            payload_retention_seconds=int(row["payload_retention"].total_seconds()),
            payloads_deleted_at=row["payloads_purged_at"],
        )

    @strawberry.field
    async def progress(self, info: strawberry.Info[Context, None]) -> Progress:
        counts = await projects.progress(info.context.db, parse_id(self.id))
        return Progress(**counts)

    # customer views, forecast, alerts: resolvers live in project_views.py
    item_progress: project_views.ItemProgress = strawberry.field(
        resolver=project_views.project_item_progress,
        description="Items done of items (progress counts answer slots: items x redundancy).",
    )
    progress_by_skill: list[project_views.SkillProgress] = strawberry.field(
        resolver=project_views.project_progress_by_skill
    )
    flagged_items: list[project_views.FlaggedItem] = strawberry.field(
        resolver=project_views.project_flagged_items,
        description="Items experts released as BAD_ITEM (flagAfterBadItemReleases of them):"
        " out of the pool, with the release reasons. Newest first, at most `first`.",
    )
    instructions: Instructions | None = strawberry.field(
        resolver=project_instructions,
        description="The current instructions for experts (null: none yet).",
    )
    instructions_history: list[Instructions] = strawberry.field(
        resolver=project_instructions_history,
        description="Every version of the instructions, newest first, at most `first` (100).",
    )
    forecast: project_views.Forecast = strawberry.field(resolver=project_views.project_forecast)
    alert_history: project_views.AlertConnection = strawberry.field(
        resolver=project_views.project_alert_history,
        description="Deadline alerts (a flip to at risk and back), newest first.",
    )
    alerts: list[project_views.Alert] = strawberry.field(
        resolver=project_views.project_alerts,
        deprecation_reason="Use alertHistory: a connection like every other listing "
        "(this list silently returns at most 50).",
    )
    # the burn-down's history (burndown.py)
    remaining_history: burndown.RemainingHistory = strawberry.field(
        resolver=burndown.project_remaining_history,
        description="Remaining work over time, oldest first, in buckets (at most 1000 a page).",
    )

    @strawberry.field
    async def ingest(self, info: strawberry.Info[Context, None]) -> Ingest | None:
        """Background ingest progress; null if the project never had a large batch."""
        return Ingest.of(await ingest.status(info.context.db, parse_id(self.id)))

    @strawberry.field(description="The named level of `priority` (high >= 100, low <= -100).")
    def priority_class(self) -> PriorityClass:
        return PriorityClass(priority_class_of(self.priority))

    @strawberry.field(description="Routing: deadline bump state and its recorded history.")
    async def routing(self, info: strawberry.Info[Context, None]) -> ProjectRouting:
        return await ProjectRouting.load(info.context.db, parse_id(self.id))


@strawberry.type
class CreateProjectPayload:
    project: Project
    accepted: bool
