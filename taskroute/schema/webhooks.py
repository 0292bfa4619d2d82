"""Webhooks over GraphQL: a customer's endpoints, their delivery log, redelivery, replay, ping
(the rules: resolvers/webhooks/endpoints.py)."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import strawberry
from strawberry.relay import PageInfo

from taskroute.resolvers.webhooks import endpoints as ep

from .context import Context
from .paging import page_info

Info = strawberry.Info[Context, None]


@strawberry.type
class WebhookEndpoint:
    id: strawberry.ID
    url: str
    event_types: list[str]
    project_id: strawberry.ID | None = strawberry.field(
        description="Only this project's events; null: every project of the customer."
    )
    description: str
    status: str = strawberry.field(description="'enabled' | 'disabled'.")
    disabled_reason: str | None = strawberry.field(
        description="Why it is disabled: by the customer, or after failing every delivery for"
        " days (TASKROUTE_WEBHOOK_DISABLE_AFTER)."
    )
    failing_since: datetime | None = strawberry.field(
        description="The first failed attempt since the last success; null: healthy."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: asyncpg.Record) -> WebhookEndpoint:
        f = ep.public_fields(row)
        return cls(
            **{
                **f,
                "id": strawberry.ID(str(f["id"])),
                "project_id": None
                if f["project_id"] is None
                else strawberry.ID(str(f["project_id"])),
            }
        )


@strawberry.type
class WebhookEndpointWithSecret:
    endpoint: WebhookEndpoint
    secret: str = strawberry.field(
        description="The signing secret (whsec_...): shown this once; rotate to get a new one."
    )


@strawberry.type
class WebhookAttempt:
    attempt: int
    at: datetime
    status: int | None = strawberry.field(description="The HTTP status; null: no answer.")
    error: str | None
    latency_ms: int


@strawberry.type
class WebhookDelivery:
    event_id: strawberry.ID = strawberry.field(description="The webhook-id header's value.")
    event_type: str
    event_at: datetime
    state: str = strawberry.field(description="'pending' | 'delivered' | 'failed'.")
    attempts: int
    last_status: int | None
    last_error: str | None
    last_latency_ms: int | None
    next_attempt_at: datetime | None = strawberry.field(
        description="When it is tried next (pending only)."
    )
    delivered_at: datetime | None
    queued_at: datetime
    attempt_log: list[WebhookAttempt] | None = strawberry.field(
        description="Every attempt, oldest first (in webhookDelivery only)."
    )

    @classmethod
    def of(cls, r: asyncpg.Record, log: list[asyncpg.Record] | None = None) -> WebhookDelivery:
        return cls(
            event_id=strawberry.ID(r["event_id"]),
            event_type=r["type"],
            event_at=r["event_at"],
            state=r["state"],
            attempts=r["attempts"],
            last_status=r["last_status"],
            last_error=r["last_error"],
            last_latency_ms=r["last_latency_ms"],
            next_attempt_at=r["next_attempt_at"] if r["state"] == "pending" else None,
            delivered_at=r["delivered_at"],
            queued_at=r["queued_at"],
            attempt_log=None if log is None else [WebhookAttempt(**dict(a)) for a in log],
        )


@strawberry.type
class WebhookDeliveryEdge:
    cursor: str
    node: WebhookDelivery


@strawberry.type
class WebhookDeliveryConnection:
    edges: list[WebhookDeliveryEdge]
    page_info: PageInfo


@strawberry.type
class WebhookReplay:
    queued: int
    end_cursor: str | None = strawberry.field(
        description="The change-feed cursor of the last event queued (null: none)."
    )
    has_more: bool = strawberry.field(description="Call again with after: endCursor.")


@strawberry.type
class WebhooksQuery:
    @strawberry.field(description="The endpoints this token manages.")
    async def webhook_endpoints(self, info: Info) -> list[WebhookEndpoint]:
        rows = await ep.list_endpoints(info.context.db, await info.context.viewer())
        return [WebhookEndpoint.of(r) for r in rows]

    @strawberry.field
    async def webhook_endpoint(self, info: Info, id: strawberry.ID) -> WebhookEndpoint:
        return WebhookEndpoint.of(
            await ep.get_endpoint(info.context.db, await info.context.viewer(), id)
        )

    @strawberry.field(description="An endpoint's delivery log, newest first.")
    async def webhook_deliveries(
        self, info: Info, endpoint_id: strawberry.ID, after: str | None = None, first: int = 100
    ) -> WebhookDeliveryConnection:
        page = await ep.deliveries_page(
            info.context.db, await info.context.viewer(), endpoint_id, after, first
        )
        edges = [WebhookDeliveryEdge(cursor=c, node=WebhookDelivery.of(r)) for c, r in page.pairs()]
        return WebhookDeliveryConnection(edges=edges, page_info=page_info(page, after))

    @strawberry.field(description="One delivery and every attempt at it.")
    async def webhook_delivery(
        self, info: Info, endpoint_id: strawberry.ID, event_id: strawberry.ID
    ) -> WebhookDelivery:
        row, log = await ep.delivery(
            info.context.db, await info.context.viewer(), endpoint_id, event_id
        )
        return WebhookDelivery.of(row, log)


@strawberry.type
class WebhooksMutation:
    @strawberry.mutation(description="A new endpoint; its secret is returned this once.")
    async def create_webhook_endpoint(
        self,
        info: Info,
        url: str,
        event_types: list[str],
        project_id: strawberry.ID | None = None,
        description: str | None = None,
    ) -> WebhookEndpointWithSecret:
        made = await ep.create_endpoint(
            info.context.db, info.context.settings, await info.context.viewer(), url,
            event_types, project_id, description,
        )  # fmt: skip
        return WebhookEndpointWithSecret(endpoint=WebhookEndpoint.of(made.row), secret=made.secret)

    @strawberry.mutation(description="Changes the fields given; enabled: true resumes it.")
    async def update_webhook_endpoint(
        self,
        info: Info,
        id: strawberry.ID,
        url: str | None = None,
        event_types: list[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
    ) -> WebhookEndpoint:
        row = await ep.update_endpoint(
            info.context.db, info.context.settings, await info.context.viewer(), id, url,
            event_types, description, enabled,
        )  # fmt: skip
        return WebhookEndpoint.of(row)

    @strawberry.mutation(description="Stops deliveries (they wait until it is enabled again).")
    async def disable_webhook_endpoint(self, info: Info, id: strawberry.ID) -> WebhookEndpoint:
        row = await ep.disable_endpoint(info.context.db, await info.context.viewer(), id)
        return WebhookEndpoint.of(row)

    @strawberry.mutation(description="Deletes the endpoint and its delivery log.")
    async def delete_webhook_endpoint(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        gone = await ep.delete_endpoint(info.context.db, await info.context.viewer(), id)
        return strawberry.ID(str(gone))

    @strawberry.mutation(
        description="A new secret, returned this once; the old one still signs (a second"
        " signature) for 24 hours."
    )
    async def rotate_webhook_secret(
        self, info: Info, id: strawberry.ID
    ) -> WebhookEndpointWithSecret:
        made = await ep.rotate_secret(info.context.db, await info.context.viewer(), id)
        return WebhookEndpointWithSecret(endpoint=WebhookEndpoint.of(made.row), secret=made.secret)

    @strawberry.mutation(description="Sends one event again (the same webhook-id), now.")
    async def redeliver_webhook_event(
        self, info: Info, endpoint_id: strawberry.ID, event_id: strawberry.ID
    ) -> WebhookDelivery:
        viewer = await info.context.viewer()
        got = await ep.redeliver(info.context.db, viewer, endpoint_id, event_id)
        row, _ = await ep.delivery(info.context.db, viewer, endpoint_id, got)
        return WebhookDelivery.of(row)

    @strawberry.mutation(
        description="Sends the item result events after a change-feed cursor again (at most"
        " 1000 per call)."
    )
    async def replay_webhook_events(
        self, info: Info, endpoint_id: strawberry.ID, after: str | None = None
    ) -> WebhookReplay:
        r = await ep.replay(info.context.db, await info.context.viewer(), endpoint_id, after)
        return WebhookReplay(queued=r.queued, end_cursor=r.end_cursor, has_more=r.has_more)

    @strawberry.mutation(description="Sends a webhook.test event; returns its event id.")
    async def ping_webhook_endpoint(self, info: Info, id: strawberry.ID) -> strawberry.ID:
        event_id = await ep.ping(info.context.db, await info.context.viewer(), id)
        return strawberry.ID(event_id)
