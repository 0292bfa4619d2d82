"""`Project.remainingHistory`: the burn-down's data as a Relay-style connection.

This module must not import `types` (types imports it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.relay import PageInfo

from taskroute.resolvers import burndown
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.schema.paging import page_info

from .context import Context

Info = strawberry.Info[Context, None]


@strawberry.type(description="The remaining work at the end of one bucket of time.")
class RemainingPoint:
    at: datetime = strawberry.field(
        description="the end of the bucket (the last one: when the project completed, or now)"
    )
    remaining: int = strawberry.field(description="slots pending, open or claimed at `at`")
    added: int = strawberry.field(description="slots created in the bucket")
    finished: int = strawberry.field(description="slots done, failed or canceled in the bucket")


@strawberry.type
class RemainingPointEdge:
    cursor: str
    node: RemainingPoint


@strawberry.type
class RemainingHistory:
    bucket_seconds: int = strawberry.field(
        description="the width of each bucket (chosen to fit the history into `first` points "
        "unless asked for)"
    )
    edges: list[RemainingPointEdge]
    page_info: PageInfo


async def project_remaining_history(
    root: strawberry.Parent[Any],
    info: Info,
    first: int = 120,
    after: str | None = None,
    bucket_seconds: int | None = None,
) -> RemainingHistory:
    """The project's remaining work over time, oldest first, for a burn-down chart."""
    found = await burndown.remaining_history(
        info.context.db, parse_id(root.id), first, after, bucket_seconds
    )
    edges = [
        RemainingPointEdge(
            cursor=c,
            node=RemainingPoint(at=p.at, remaining=p.remaining, added=p.added, finished=p.finished),
        )
        for c, p in found.page.pairs()
    ]
    return RemainingHistory(
        bucket_seconds=found.bucket_seconds,
        edges=edges,
        page_info=page_info(found.page, after),
    )
