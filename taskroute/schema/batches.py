"""GraphQL of batches: addTasks and the payload audit (createProject lives in projects.py)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import strawberry

from taskroute.resolvers import batches, ingest, payload_audit
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.paging import Page

from .batch_types import AuditEntry, AuditEntryConnection, AuditEntryEdge, AuditPage, Ingest
from .context import Context
from .inputs import TaskInput, as_dict
from .paging import page_info
from .types import Project

Info = strawberry.Info[Context, None]


@dataclass
class _TaskList:
    """Lets addTasks' task list go through the same `as_dict` as createProject's."""

    tasks: list[TaskInput]


@strawberry.type
class AddTasksPayload:
    project: Project
    # false: stored and open now; true: queued for background ingest (see `ingest`)
    accepted: bool
    # tasks newly stored now (a re-sent externalId is skipped); null when accepted
    added: int | None
    ingest: Ingest | None


@strawberry.type
class BatchesMutation:
    @strawberry.mutation
    async def add_tasks(
        self, info: Info, project_id: strawberry.ID, tasks: list[TaskInput]
    ) -> AddTasksPayload:
        customer_id = (await info.context.viewer()).require_customer()
        settings = info.context.settings
        raw = as_dict(_TaskList(tasks))["tasks"]
        specs = v.task_specs(raw, settings.max_tasks_per_request, settings.max_payload_bytes)
        added = await batches.add_tasks(
            info.context.services, customer_id, parse_id(project_id, "project"), specs
        )
        status = await ingest.status(info.context.db, added.project["id"])
        return AddTasksPayload(
            project=Project.of(added.project),
            accepted=added.accepted,
            added=added.added,
            ingest=Ingest.of(status),
        )


@strawberry.type
class BatchesQuery:
    @strawberry.field(
        description="Who received which task's payload, when, oldest first (customers: their "
        "projects; admins: all)."
    )
    async def payload_audit(
        self,
        info: Info,
        project_id: strawberry.ID | None = None,
        expert_id: strawberry.ID | None = None,
        after: str | None = None,
        first: int = 100,
    ) -> AuditEntryConnection:
        page = await _audit_page(info, project_id, expert_id, after, first, "first")
        edges = [AuditEntryEdge(cursor=c, node=AuditEntry.of(r)) for c, r in page.pairs()]
        return AuditEntryConnection(edges=edges, page_info=page_info(page, after))

    @strawberry.field(
        deprecation_reason="Use payloadAudit: a connection like every other listing (its "
        "`after` takes this field's cursors too)."
    )
    async def audit_log(
        self,
        info: Info,
        project_id: strawberry.ID | None = None,
        expert_id: strawberry.ID | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> AuditPage:
        """Who received which task's payload, when (customers: own projects; admin: all)."""
        page = await _audit_page(info, project_id, expert_id, after, limit, "limit")
        return AuditPage(
            entries=[AuditEntry.of(r) for r in page.rows],
            next_cursor=payload_audit.entry_seq_next_cursor(page),
        )


async def _audit_page(
    info: Info,
    project_id: strawberry.ID | None,
    expert_id: strawberry.ID | None,
    after: str | None,
    first: int,
    field: str,
) -> Page[asyncpg.Record]:
    return await payload_audit.audit_page(
        info.context.db,
        (await info.context.viewer()).customer_scope(),
        parse_id(project_id, "project") if project_id is not None else None,
        parse_id(expert_id, "expert") if expert_id is not None else None,
        after,
        first,
        field,
    )
