"""GraphQL input types; converted to the plain snake_case dicts `validation` checks."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from enum import Enum
from typing import Any

import strawberry
from strawberry.scalars import JSON

from .routing_types import PriorityClass


@strawberry.enum(description="When submitted work is paid (docs/quality-and-payment.md).")
class PaymentPolicy(Enum):
    on_submit = "on_submit"
    on_acceptance = "on_acceptance"
    on_review = "on_review"


@strawberry.enum(
    description="How the workbench presents a project's tasks (docs/dashboard-and-workbench.md)."
)
class Layout(Enum):
    GENERIC = "GENERIC"
    GRADE = "GRADE"
    PAIRWISE = "PAIRWISE"
    REVIEW = "REVIEW"


@strawberry.input
class SkillInput:
    skill: str
    quality: float = 1.0


@strawberry.input
class TaskInput:
    skill: str
    payload: JSON
    priority: int = 0
    external_id: str | None = None
    gold: JSON | None = None
    # capability tags an expert must carry to be offered this task
    required_capabilities: list[str] | None = None
    answer_schema: JSON | None = strawberry.field(
        default=None,
        description="JSON Schema for this item's answers, replacing the project's answerSchema.",
    )


@strawberry.input
class CreateProjectInput:
    name: str
    tasks: list[TaskInput]
    deadline: datetime | None = None
    # higher first; default 0, or the level of `priority_class` (HIGH 100, NORMAL 0, LOW -100)
    priority: int | None = None
    priority_class: PriorityClass | None = None
    lease_seconds: int = 1800
    pay_cents: int = 0
    min_quality: float = 0.0
    redundancy: int = 1
    max_retries: int = 3
    # silence (no claim, no heartbeat) after which a claim returns to the pool; capped by
    # the lease. Clients should heartbeat well within it (a third of it, say).
    heartbeat_timeout_seconds: int = 300
    answer_schema: JSON | None = strawberry.field(
        default=None,
        description="JSON Schema every answer must match (submit refuses others with"
        " BAD_INPUT naming the path); fixed at creation. Null: any JSON.",
    )
    payment_policy: PaymentPolicy | None = strawberry.field(
        default=None, description="Default on_submit (paid at submit)."
    )
    auto_approve_seconds: int | None = strawberry.field(
        default=None,
        description="on_review: work not reviewed this long after its submit is accepted"
        " (default 259200, 3 days).",
    )
    override_seconds: int | None = strawberry.field(
        default=None,
        description="How long after a rejection it may still be approved (default 30 days).",
    )
    pay_adjudicated_disagreements: bool | None = strawberry.field(
        default=None,
        description="on_acceptance: pay answers that disagree with an adjudicated result"
        " (default true).",
    )
    flag_after_bad_item_releases: int | None = strawberry.field(
        default=None,
        description="An item released as BAD_ITEM by this many experts leaves the pool as"
        " flagged (default 2, 1-100).",
    )
    max_items_per_expert: int | None = strawberry.field(
        default=None,
        description="No expert answers (or holds) more than this many of the project's items"
        " (default: no cap).",
    )
    min_seconds_per_task: int | None = strawberry.field(
        default=None,
        description="An answer submitted sooner than this after its claim is stored and"
        " flagged tooFast (default: no minimum; 1-86400).",
    )
    too_fast_policy: str | None = strawberry.field(
        default=None,
        description="'count' (default): a tooFast answer counts like any other; 'exclude':"
        " it is never paid automatically (it waits for the customer's review) and a tooFast"
        " gold answer is scored as wrong.",
    )
    layout: Layout | None = strawberry.field(
        default=None,
        description="How the workbench presents the tasks (default GENERIC); the answer"
        " schema must fit it (BAD_INPUT naming the mismatch).",
    )
    candidate_keys: list[str] | None = strawberry.field(
        default=None, description="PAIRWISE: the payload keys of candidates a and b (default a, b)."
    )
    expert_review: bool | None = strawberry.field(
        default=None,
        description="on_review: route each answer's review to experts holding the skill"
        " review:<skill> (default false).",
    )
    review_pay_cents: int | None = strawberry.field(
        default=None, description="expertReview: a reviewer's pay per review (default 0)."
    )
    pay_corrected: bool | None = strawberry.field(
        default=None,
        description="expertReview: pay an answer a reviewer corrected (default false: rejected).",
    )
    payload_retention_seconds: int | None = strawberry.field(
        default=None,
        description="Payloads are deleted from the store this long after the project ends"
        " (default 2592000, 30 days; 0: at once; at most 10 years). Items, results, the"
        " ledger and the audit stay.",
    )


def _fields(value: Any) -> dict[str, Any]:
    # Shallow, unlike dataclasses.asdict: that deep-copies every JSON payload (seconds for a
    # 20,000-task batch) although nothing mutates them.
    return {f.name: getattr(value, f.name) for f in fields(value)}


def as_dict(value: Any) -> Any:
    """Strawberry inputs are dataclasses; unset optional fields are dropped."""
    raw = _fields(value)
    if "tasks" in raw:
        raw["tasks"] = [
            {k: v for k, v in _fields(t).items() if v is not None or k == "payload"}
            for t in raw["tasks"]
        ]
    return {k: v for k, v in raw.items() if v is not None}
