"""Quality over GraphQL: policy, gold pool, results and their change feed, pausing, retraction."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

import asyncpg
import strawberry
from strawberry.relay import PageInfo
from strawberry.scalars import JSON

from taskroute.resolvers import answer_schema, batches, projects
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.quality import gold, pausing, policy, report, result_feed, retraction

from .context import Context
from .inputs import TaskInput
from .paging import page_info

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
    # 'sequential' (the pause test, docs/quality-and-payment.md) | 'fixed' (min gold, low estimate)
    pause_rule: str
    trusted_accuracy: float
    pause_risk: float
    suspect_gold_ratio: float
    proven_gold_ratio: float
    # an expert gets suspectGoldRatio until the evidence is this many times in their favour
    clear_evidence: float
    # 'majority' | 'weighted' (answers weighted by each expert's measured accuracy)
    resolution: str
    answer_choices: int
    confidence_threshold: float
    # dynamic overlap (weighted): answers each item starts with; null: all redundancy slots
    min_answers: int | None

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
    pause_rule: str | None = None
    trusted_accuracy: float | None = None
    pause_risk: float | None = None
    suspect_gold_ratio: float | None = None
    proven_gold_ratio: float | None = None
    clear_evidence: float | None = None
    resolution: str | None = None
    answer_choices: int | None = None
    confidence_threshold: float | None = None
    # 0 turns dynamic overlap off
    min_answers: int | None = None


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
    # 'majority' | 'plurality' | 'adjudicated' | 'weighted' | 'weighted-plurality'
    method: str | None
    version: int
    # the weighted rule's probability of the answer (null under the majority rule)
    confidence: float | None
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
            confidence=r["confidence"],
            updated_at=r["updated_at"],
        )


@strawberry.type
class ItemResultEdge:
    cursor: str
    node: ItemResult


@strawberry.type
class ItemResultConnection:
    edges: list[ItemResultEdge]
    page_info: PageInfo


@strawberry.type
class ResultPage:
    items: list[ItemResult]
    # pass as `after` for the next page (unchanged when this page is empty)
    cursor: str | None
    has_more: bool


@strawberry.type
class ResultChange:
    cursor: str = strawberry.field(
        deprecation_reason="The change's number, for the deprecated resultChanges; "
        "itemResultChanges pages by its edges' cursors."
    )
    item_id: strawberry.ID
    external_id: str | None
    version: int
    # 'resolved' | 're-resolved' | 'retracted'
    change: str
    answer: JSON | None
    agreement: float | None
    at: datetime

    @classmethod
    def of(cls, r: asyncpg.Record) -> ResultChange:
        return cls(
            cursor=str(r["seq"]),
            item_id=strawberry.ID(str(r["item_id"])),
            external_id=r["external_id"],
            version=r["version"],
            change=r["change"],
            answer=r["answer"],
            agreement=r["agreement"],
            at=r["at"],
        )


@strawberry.type
class ResultChangeEdge:
    cursor: str
    node: ResultChange


@strawberry.type
class ResultChangeConnection:
    edges: list[ResultChangeEdge]
    page_info: PageInfo


@strawberry.type
class ResultChangePage:
    changes: list[ResultChange]
    cursor: str
    has_more: bool


@strawberry.type
class ExpertEvidence:
    """One expert's standing in a skill, anonymous: what the pause and weighting rules saw."""

    skill: str
    status: str
    gold_seen: int
    gold_correct: int
    gold_since_unpause: int
    # how many times likelier the gold answers since the last unpause are from an expert below
    # the bar than from a trusted one (the pause test; pausing needs 1 / pauseRisk)
    pause_evidence: float | None


@strawberry.type
class QualityReport:
    resolved: int
    adjudicated: int
    adjudicating: int
    pending: int
    mean_agreement: float | None
    mean_confidence: float | None
    # answers per resolved item (dynamic overlap lowers it)
    answers_per_item: float | None
    krippendorff_alpha: float | None
    # the project's rules as built, in plain words
    rules: list[str]
    experts: list[ExpertEvidence]

    @classmethod
    def of(cls, r: dict[str, Any]) -> QualityReport:
        return cls(**{**r, "experts": [ExpertEvidence(**e) for e in r["experts"]]})


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
    # the pause test's evidence (see ExpertEvidence.pauseEvidence); 1.0 before any gold
    pause_evidence: float | None

    @classmethod
    def of(cls, r: Any) -> ExpertSkill:
        fields = {f: r[f] for f in cls.__annotations__ if f != "pause_evidence"}
        return cls(**fields, pause_evidence=report.evidence_ratio(r["pause_llr"]))


@strawberry.type
class Retraction:
    answers: int
    items: int
    reversals: int


async def _project(info: Info, project_id: strawberry.ID) -> Any:
    """The project if the viewer owns it (admins: any); NOT_FOUND otherwise."""
    viewer = await info.context.viewer()
    return await projects.visible_project(info.context.db, viewer, parse_id(project_id, "project"))


@strawberry.type
class QualityQuery:
    @strawberry.field
    async def quality_policy(self, info: Info, project_id: strawberry.ID) -> QualityPolicy:
        project = await _project(info, project_id)
        return QualityPolicy.of(await policy.get_policy(info.context.db, project["id"]))

    @strawberry.field
    async def gold_pool(self, info: Info, project_id: strawberry.ID) -> list[GoldPoolSkill]:
        project = await _project(info, project_id)
        rows = await gold.gold_pool(info.context.db, project["id"])
        return [GoldPoolSkill(**dict(r)) for r in rows]

    @strawberry.field(description="Resolved items in item-id order.")
    async def item_results(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ItemResultConnection:
        project = await _project(info, project_id)
        page = await result_feed.results_page(info.context.db, project["id"], after, first)
        edges = [ItemResultEdge(cursor=c, node=ItemResult.of(r)) for c, r in page.pairs()]
        return ItemResultConnection(edges=edges, page_info=page_info(page, after))

    @strawberry.field(
        description="The feed of resolved, re-resolved and retracted results, in commit order."
    )
    async def item_result_changes(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ResultChangeConnection:
        project = await _project(info, project_id)
        page = await result_feed.changes_page(info.context.db, project["id"], after, first)
        edges = [ResultChangeEdge(cursor=c, node=ResultChange.of(r)) for c, r in page.pairs()]
        return ResultChangeConnection(edges=edges, page_info=page_info(page, after))

    @strawberry.field(
        deprecation_reason="Use itemResults: a connection like every other listing (its "
        "`after` takes this field's cursors too)."
    )
    async def results(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ResultPage:
        project = await _project(info, project_id)
        page = await result_feed.results_page(info.context.db, project["id"], after, first)
        return ResultPage(
            items=[ItemResult.of(r) for r in page.rows],
            cursor=result_feed.item_id_cursor(page, after),
            has_more=page.has_next,
        )

    @strawberry.field(
        deprecation_reason="Use itemResultChanges: a connection like every other listing (its "
        "`after` takes this field's cursors too)."
    )
    async def result_changes(
        self, info: Info, project_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> ResultChangePage:
        project = await _project(info, project_id)
        page = await result_feed.changes_page(info.context.db, project["id"], after, first)
        return ResultChangePage(
            changes=[ResultChange.of(r) for r in page.rows],
            cursor=result_feed.change_seq_cursor(page, after),
            has_more=page.has_next,
        )

    @strawberry.field
    async def quality_report(self, info: Info, project_id: strawberry.ID) -> QualityReport:
        project = await _project(info, project_id)
        return QualityReport.of(await report.report(info.context.db, project["id"]))

    @strawberry.field
    async def expert_skills(self, info: Info, expert_id: strawberry.ID) -> list[ExpertSkill]:
        (await info.context.viewer()).require_admin()
        rows = await pausing.expert_skills(info.context.db, parse_id(expert_id, "expert"))
        return [ExpertSkill.of(r) for r in rows]


@strawberry.type
class QualityMutation:
    @strawberry.mutation
    async def set_quality_policy(
        self, info: Info, project_id: strawberry.ID, input: QualityPolicyInput
    ) -> QualityPolicy:
        project = await _project(info, project_id)
        raw = {k: v for k, v in asdict(input).items() if v is not None}
        return QualityPolicy.of(await policy.set_policy(info.context.db, project["id"], raw))

    @strawberry.mutation
    async def add_gold_items(
        self, info: Info, project_id: strawberry.ID, tasks: list[TaskInput]
    ) -> int:
        project = await _project(info, project_id)
        settings = info.context.settings
        raw = [
            {k: v for k, v in asdict(t).items() if v is not None or k == "payload"} for t in tasks
        ]
        answer_schema.check_gold_items(raw, project["answer_schema"])
        return await gold.add_gold_items(
            info.context.db,
            batches.blobs_of(info.context.services),
            project["id"],
            raw,
            gold.GoldLimits(
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
        await pausing.pause_expert(info.context.db, eid, skill, reason)
        return [ExpertSkill.of(r) for r in await pausing.expert_skills(info.context.db, eid)]

    @strawberry.mutation
    async def unpause_expert(
        self, info: Info, expert_id: strawberry.ID, skill: str, reason: str = "unpaused by admin"
    ) -> list[ExpertSkill]:
        (await info.context.viewer()).require_admin()
        eid = parse_id(expert_id, "expert")
        await pausing.unpause_expert(info.context.db, eid, skill, reason)
        return [ExpertSkill.of(r) for r in await pausing.expert_skills(info.context.db, eid)]

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
        done = await retraction.retract(
            info.context.db,
            parse_id(expert_id, "expert"),
            skill,
            since,
            "admin",
            reason,
            clawback,
        )
        return Retraction(answers=done.answers, items=done.items, reversals=done.reversals)
