"""A customer's webhook endpoints, their delivery log, redelivery, replay and the test ping.

Who manages what: a customer's account-wide token every endpoint of the customer; a token
limited to one project only the endpoints filtered to that project (it may create those, never
an account-wide one: its scope is a ceiling); read-only tokens none (the list shows URLs and
the log shows what the receiver answered); admins and experts none. An endpoint out of
sight is not found, whoever owns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, Conflict, Forbidden, NotFound
from taskroute.resolvers import cursors, paging, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import Viewer
from taskroute.resolvers.paging import Page
from taskroute.resolvers.quality import result_feed

from . import addresses, signing

EVENT_TYPES = (
    "item.result.resolved",
    "item.result.changed",
    "project.completed",
    "project.canceled",
    "project.ingest.finished",
    "project.ingest.failed",
    "project.deadline_alert.raised",
    "project.deadline_alert.cleared",
    "review.needed",
)
PING = "webhook.test"  # sent by the test ping only; not subscribable
MAX_ENDPOINTS = 20  # per customer
DESCRIPTION_MAX = 500
ROTATION_GRACE = 86400  # seconds the previous secret still signs (a second signature)
REPLAY_MAX = 1000  # events queued per replay call; call again from its end cursor
DELIVERY = "webhook-delivery"
EVENT_ID_MAX = 100


@dataclass(frozen=True)
class Scope:
    customer_id: UUID
    project_id: UUID | None  # a project token's project (None: account-wide)


@dataclass(frozen=True)
class WithSecret:
    """An endpoint and its signing secret: returned by creation and rotation only."""

    row: asyncpg.Record
    secret: str


@dataclass(frozen=True)
class Replay:
    queued: int
    end_cursor: str | None  # the change-feed cursor of the last event queued
    has_more: bool


def scope(viewer: Viewer) -> Scope:
    if viewer.role != "customer" or viewer.customer_id is None:
        raise NotFound("only customers can do this")
    if viewer.read_only:
        raise Forbidden("this token is read-only")
    return Scope(viewer.customer_id, viewer.project_id)


def _event_types(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not raw or len(raw) > len(EVENT_TYPES):
        raise BadInput(f"event_types must list some of {list(EVENT_TYPES)}", field="event_types")
    unknown = [t for t in raw if t not in EVENT_TYPES]
    if unknown:
        raise BadInput(
            f"unknown event types {unknown}; known: {list(EVENT_TYPES)}", field="event_types"
        )
    return sorted(set(raw))


def _description(raw: Any) -> str:
    if raw is None or raw == "":
        return ""
    return v.text(raw, "description", DESCRIPTION_MAX)


def _parse_id(raw: Any) -> UUID:
    try:
        return UUID(str(raw))
    except ValueError as exc:
        raise NotFound("no such webhook endpoint") from exc


async def list_endpoints(db: Database, viewer: Viewer) -> list[asyncpg.Record]:
    s = scope(viewer)
    return await db.fetch(Q["webhook_endpoints_of"], s.customer_id, s.project_id)


async def get_endpoint(db: Any, viewer: Viewer, endpoint_id: Any) -> asyncpg.Record:
    s = scope(viewer)
    row = await db.fetchrow(
        Q["webhook_endpoint_get"], _parse_id(endpoint_id), s.customer_id, s.project_id
    )
    if row is None:
        raise NotFound("no such webhook endpoint")
    return row


async def create_endpoint(
    db: Database,
    settings: Settings,
    viewer: Viewer,
    url: Any,
    event_types: Any,
    project_id: Any = None,
    description: Any = None,
) -> WithSecret:
    s = scope(viewer)
    types = _event_types(event_types)
    text = _description(description)
    project: UUID | None = None
    if project_id is not None:
        try:
            project = UUID(str(project_id))
        except ValueError as exc:
            raise NotFound("no such project") from exc
        await projects.get_project(db, project, viewer.customer_scope())
    elif s.project_id is not None:
        # an account-wide endpoint would widen the token's scope
        raise Forbidden("this token is limited to one project", project_id=str(s.project_id))
    checked = await addresses.check(url, settings.webhook_allow_private)
    secret = signing.new_secret()
    async with db.transaction() as conn:
        await conn.execute(Q["webhook_customer_lock"], s.customer_id)
        if await conn.fetchval(Q["webhook_endpoint_count"], s.customer_id) >= MAX_ENDPOINTS:
            raise Conflict(f"a customer has at most {MAX_ENDPOINTS} webhook endpoints")
        row = await conn.fetchrow(
            Q["webhook_endpoint_insert"], s.customer_id, project, checked, types, text, secret
        )
    assert row is not None
    return WithSecret(row, secret)


async def update_endpoint(
    db: Database,
    settings: Settings,
    viewer: Viewer,
    endpoint_id: Any,
    url: Any = None,
    event_types: Any = None,
    description: Any = None,
    enabled: Any = None,
) -> asyncpg.Record:
    s = scope(viewer)
    eid = _parse_id(endpoint_id)
    types = None if event_types is None else _event_types(event_types)
    text = None if description is None else _description(description)
    if enabled is not None and not isinstance(enabled, bool):
        raise BadInput("enabled must be true or false", field="enabled")
    await get_endpoint(db, viewer, eid)  # not found before any URL is resolved
    checked = None if url is None else await addresses.check(url, settings.webhook_allow_private)
    async with db.transaction() as conn:
        row = await conn.fetchrow(
            Q["webhook_endpoint_update"], eid, s.customer_id, s.project_id, checked, types, text,
            enabled,
        )  # fmt: skip
        if row is None:
            raise NotFound("no such webhook endpoint")
        if enabled:
            await conn.execute(Q["webhook_endpoint_resume"], eid)
    return row


async def disable_endpoint(db: Database, viewer: Viewer, endpoint_id: Any) -> asyncpg.Record:
    s = scope(viewer)
    row = await db.fetchrow(
        Q["webhook_endpoint_update"], _parse_id(endpoint_id), s.customer_id, s.project_id,
        None, None, None, False,
    )  # fmt: skip
    if row is None:
        raise NotFound("no such webhook endpoint")
    return row


async def delete_endpoint(db: Database, viewer: Viewer, endpoint_id: Any) -> UUID:
    s = scope(viewer)
    deleted = await db.fetchval(
        Q["webhook_endpoint_delete"], _parse_id(endpoint_id), s.customer_id, s.project_id
    )
    if deleted is None:
        raise NotFound("no such webhook endpoint")
    return UUID(str(deleted))


async def rotate_secret(db: Database, viewer: Viewer, endpoint_id: Any) -> WithSecret:
    s = scope(viewer)
    secret = signing.new_secret()
    row = await db.fetchrow(
        Q["webhook_endpoint_rotate"], _parse_id(endpoint_id), s.customer_id, s.project_id,
        secret, ROTATION_GRACE,
    )  # fmt: skip
    if row is None:
        raise NotFound("no such webhook endpoint")
    return WithSecret(row, secret)


# --- the delivery log and what acts on it --------------------------------------------------


async def deliveries_page(
    db: Database, viewer: Viewer, endpoint_id: Any, after: str | None, first: Any
) -> Page[asyncpg.Record]:
    endpoint = await get_endpoint(db, viewer, endpoint_id)
    start = None if after is None or after == "" else cursors.decode_seq(after, DELIVERY)
    return await paging.read(
        db, "webhook_deliveries_page", endpoint["id"], start, first=paging.size(first),
        cursor=lambda r: cursors.encode(DELIVERY, str(r["seq"])),
    )  # fmt: skip


def _event_id(raw: Any) -> str:
    if not isinstance(raw, str) or not raw or len(raw) > EVENT_ID_MAX:
        raise NotFound("no such webhook delivery")
    return raw


async def delivery(
    db: Database, viewer: Viewer, endpoint_id: Any, event_id: Any
) -> tuple[asyncpg.Record, list[asyncpg.Record]]:
    """One delivery and every attempt at it, oldest first."""
    endpoint = await get_endpoint(db, viewer, endpoint_id)
    row = await db.fetchrow(Q["webhook_delivery_get"], endpoint["id"], _event_id(event_id))
    if row is None:
        raise NotFound("no such webhook delivery")
    return row, await db.fetch(Q["webhook_attempts_of"], endpoint["id"], row["event_id"])


async def redeliver(db: Database, viewer: Viewer, endpoint_id: Any, event_id: Any) -> str:
    """The event is sent again (same id), whatever became of it, now."""
    endpoint = await get_endpoint(db, viewer, endpoint_id)
    got = await db.fetchval(Q["webhook_redeliver"], endpoint["id"], _event_id(event_id))
    if got is None:
        raise NotFound("no such webhook delivery")
    return str(got)


async def replay(db: Database, viewer: Viewer, endpoint_id: Any, after: Any) -> Replay:
    """Item result events after a change-feed cursor (itemResultChanges' cursors, or a
    delivered event's `cursor`), sent again to this endpoint with their original ids, at most
    REPLAY_MAX per call; `has_more`: call again after `end_cursor`."""
    endpoint = await get_endpoint(db, viewer, endpoint_id)
    if after is not None and not isinstance(after, str):
        raise BadInput("after must be a change-feed cursor", field="after")
    start = result_feed.change_after(after)
    row = await db.fetchrow(Q["webhook_replay"], endpoint["id"], start, REPLAY_MAX)
    assert row is not None
    last = row["last_seq"]
    end = None if last is None else cursors.encode(result_feed.CHANGE, str(last))
    return Replay(int(row["queued"]), end, int(row["queued"]) >= REPLAY_MAX)


async def ping(db: Database, viewer: Viewer, endpoint_id: Any) -> str:
    """A `webhook.test` event to this endpoint alone; its id (find it in the log)."""
    endpoint = await get_endpoint(db, viewer, endpoint_id)
    data = {"endpoint_id": str(endpoint["id"]), "message": "a test event from taskroute"}
    event_id = await db.fetchval(
        Q["webhook_ping"], endpoint["id"], endpoint["customer_id"], endpoint["project_id"], data
    )
    return str(event_id)


def public_fields(row: asyncpg.Record) -> dict[str, Any]:
    """An endpoint as the APIs show it: never its secret."""
    return {
        "id": row["id"],
        "url": row["url"],
        "event_types": list(row["event_types"]),
        "project_id": row["project_id"],
        "description": row["description"],
        "status": row["status"],
        "disabled_reason": row["disabled_reason"],
        "failing_since": row["failing_since"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
