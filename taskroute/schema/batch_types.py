"""GraphQL types of batches: ingest progress and the audit log (no import of `types`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.relay import PageInfo


@strawberry.type
class Ingest:
    """Background ingest of a project's large batches, all jobs taken together."""

    # retrying | running | queued | failed | canceled | done (the most pressing first)
    state: str
    tasks_stored: int
    tasks_total: int
    # the latest error of an attempt (e.g. the object store is down); null once it recovers
    error: str | None

    @classmethod
    def of(cls, row: dict[str, Any] | None) -> Ingest | None:
        if row is None:
            return None
        return cls(
            state=row["state"],
            tasks_stored=row["tasks_stored"],
            tasks_total=row["tasks_total"],
            error=row["error"],
        )


@strawberry.type
class AuditEntry:
    cursor: str = strawberry.field(
        deprecation_reason="The entry's number, for the deprecated auditLog; payloadAudit "
        "pages by its edges' cursors."
    )
    expert_id: strawberry.ID
    customer_id: strawberry.ID
    project_id: strawberry.ID
    task_id: strawberry.ID
    # claim | payload_fetch
    action: str
    at: datetime

    @classmethod
    def of(cls, row: Any) -> AuditEntry:
        return cls(
            cursor=str(row["seq"]),
            expert_id=strawberry.ID(str(row["expert_id"])),
            customer_id=strawberry.ID(str(row["customer_id"])),
            project_id=strawberry.ID(str(row["project_id"])),
            task_id=strawberry.ID(str(row["task_id"])),
            action=row["action"],
            at=row["at"],
        )


@strawberry.type
class AuditEntryEdge:
    cursor: str
    node: AuditEntry


@strawberry.type
class AuditEntryConnection:
    edges: list[AuditEntryEdge]
    page_info: PageInfo


@strawberry.type
class AuditPage:
    entries: list[AuditEntry]
    # pass as `after` for the next page; null on the last page
    next_cursor: str | None
