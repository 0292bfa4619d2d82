"""Quality over GraphQL: policy, gold pool, results and their change feed, pausing, retraction."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

import strawberry
from strawberry.scalars import JSON

from taskroute.auth import parse_id
from taskroute.resolvers import batches, projects, quality

from .context import Context
from .inputs import TaskInput

Info = strawberry.Info[Context, None]


@strawberry.type
class QualityPolicy:
    gold_ratio: float
    exploration_tasks: int
    exploration_gold_ratio: float
    gold_max_exposures: int
    gold_low_water: int
    answer_field: str | None
    agreement_threshold: float
    adjudication_min_quality: float
    pause_min_gold: int
    pause_below: float
    adjudicate: bool

    @classmethod
    def of(cls, row: Any) -> QualityPolicy:
        return cls(**{f: row[f] for f in cls.__annotations__})


@strawberry.input
class QualityPolicyInput:
    gold_ratio: float | None = None
    exploration_tasks: int | None = None
    exploration_gold_ratio: float | None = None
    gold_max_exposures: int | None = None
    gold_low_water: int | None = None
    # "" compares whole answers again; null leaves the field as it is
    answer_field: str | None = None
    agreement_threshold: float | None = None
    adjudication_min_quality: float | None = None
    pause_min_gold: int | None = None
    pause_below: float | None = None
    adjudicate: bool | None = None


@strawberry.type
class GoldPoolSkill:
    skill: str
    active: int
    retired: int
    exposures: int
    # fewer unretired gold items than the project's goldLowWater: add gold for this skill
    low: bool


@strawberry.type
class ItemResult:
    item_id: strawberry.ID
    external_id: str | None
    answer: JSON | None
    agreement: float | None
    answers: int
    method: str | None
    version: int
    updated_at: datetime

    @classmethod
    def of(cls, r: Any) -> ItemResult:
        return cls(
            item_id=strawberry.ID(str(r["item_id"])),
            external_id=r["external_id"],
            answer=r["answer"],
            agreement=r["agreement"],
            answers=r["answers"],
            method=r["method"],
            version=r["version"],
            updated_at=r["updated_at"],
        )


@strawberry.type
class ResultPage:
    items: list[ItemResult]
    # pass as `after` for the next page (unchanged when this page is empty)
    cursor: str | None
    has_more: bool


@strawberry.type
class ResultChange:
    cursor: str
    item_id: strawberry.ID
    external_id: str | None
    version: int
    # 'resolved' | 're-resolved' | 'retracted'
    change: str
    answer: JSON | None
    agreement: float | None
    at: datetime


@strawberry.type
class ResultChangePage:
    changes: list[ResultChange]
    cursor: str
    has_more: bool


@strawberry.type
class QualityReport:
    resolved: int
    adjudicated: int
    adjudicating: int
    pending: int
    mean_agreement: float | None
    krippendorff_alpha: float | None


@strawberry.type
class ExpertSkill:
    skill: str
    status: str
    status_reason: str | None
    status_at: datetime | None
    quality: float
    gold_seen: int
    gold_correct: int
    tasks_done: int

    @classmethod
    def of(cls, r: Any) -> ExpertSkill:
        return cls(**{f: r[f] for f in cls.__annotations__})


@strawberry.type
class Retraction:
    answers: int
    items: int
    reversals: int


async def _project(info: Info, project_id: strawberry.ID) -> Any:
    """The project if the viewer owns it (admins: any); NOT_FOUND otherwise."""
    viewer = await info.context.viewer()
    return await projects.get_project(
        info.context.db, parse_id(project_id, "project"), viewer.customer_scope()
    )


@strawberry.type
class QualityQuery:
    @strawberry.field
    async def quality_policy(self, info: Info, project_id: strawberry.ID) -> QualityPolicy:
        project = await _project(info, project_id)
        return QualityPolicy.of(await quality.get_policy(info.context.db, project["id"]))

    @strawberry.field
    async def gold_pool(self, info: Info, project_id: strawberry.ID) -> list[GoldPoolSkill]:
        project = await _project(info, project_id)
        rows = await quality.gold_pool(info.context.db, project["id"])
        return [GoldPoolSkill(**dict(r)) for r in rows]

    @strawberry.field
    async def results(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ResultPage:
        project = await _project(info, project_id)
        rows, cursor = await quality.results_page(info.context.db, project["id"], after, first)
        return ResultPage(
            items=[ItemResult.of(r) for r in rows], cursor=cursor, has_more=len(rows) == first
        )

    @strawberry.field
    async def result_changes(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ResultChangePage:
        project = await _project(info, project_id)
        rows, cursor = await quality.changes_page(info.context.db, project["id"], after, first)
        changes = [
            ResultChange(
                cursor=str(r["seq"]),
                item_id=strawberry.ID(str(r["item_id"])),
                external_id=r["external_id"],
                version=r["version"],
                change=r["change"],
                answer=r["answer"],
                agreement=r["agreement"],
                at=r["at"],
            )
            for r in rows
        ]
        return ResultChangePage(changes=changes, cursor=cursor, has_more=len(rows) == first)

    @strawberry.field
    async def quality_report(self, info: Info, project_id: strawberry.ID) -> QualityReport:
        project = await _project(info, project_id)
        return QualityReport(**await quality.report(info.context.db, project["id"]))

    @strawberry.field
    async def expert_skills(self, info: Info, expert_id: strawberry.ID) -> list[ExpertSkill]:
        (await info.context.viewer()).require_admin()
        rows = await quality.expert_skills(info.context.db, parse_id(expert_id, "expert"))
        return [ExpertSkill.of(r) for r in rows]


@strawberry.type
class QualityMutation:
    @strawberry.mutation
    async def set_quality_policy(
        self, info: Info, project_id: strawberry.ID, input: QualityPolicyInput
    ) -> QualityPolicy:
        project = await _project(info, project_id)
        raw = {k: v for k, v in asdict(input).items() if v is not None}
        return QualityPolicy.of(await quality.set_policy(info.context.db, project["id"], raw))

    @strawberry.mutation
    async def add_gold_items(
        self, info: Info, project_id: strawberry.ID, tasks: list[TaskInput]
    ) -> int:
        project = await _project(info, project_id)
        settings = info.context.settings
        raw = [
            {k: v for k, v in asdict(t).items() if v is not None or k == "payload"} for t in tasks
        ]
        return await quality.add_gold_items(
            info.context.db,
            batches.blobs_of(info.context.services),
            project["id"],
            raw,
            quality.GoldLimits(
                settings.max_tasks_per_request,
                settings.max_payload_bytes,
                settings.inline_payload_bytes,
            ),
        )

    @strawberry.mutation
    async def pause_expert(
        self, info: Info, expert_id: strawberry.ID, skill: str, reason: str
    ) -> list[ExpertSkill]:
        (await info.context.viewer()).require_admin()
        eid = parse_id(expert_id, "expert")
        await quality.pause_expert(info.context.db, eid, skill, reason)
        return [ExpertSkill.of(r) for r in await quality.expert_skills(info.context.db, eid)]

    @strawberry.mutation
    async def unpause_expert(
        self, info: Info, expert_id: strawberry.ID, skill: str, reason: str = "unpaused by admin"
    ) -> list[ExpertSkill]:
        (await info.context.viewer()).require_admin()
        eid = parse_id(expert_id, "expert")
        await quality.unpause_expert(info.context.db, eid, skill, reason)
        return [ExpertSkill.of(r) for r in await quality.expert_skills(info.context.db, eid)]

    @strawberry.mutation
    async def retract_labels(
        self,
        info: Info,
        expert_id: strawberry.ID,
        reason: str,
        skill: str | None = None,
        since: datetime | None = None,
        clawback: bool = False,
    ) -> Retraction:
        (await info.context.viewer()).require_admin()
        done = await quality.retract(
            info.context.db,
            parse_id(expert_id, "expert"),
            skill,
            since,
            "admin",
            reason,
            clawback,
        )
        return Retraction(answers=done.answers, items=done.items, reversals=done.reversals)
