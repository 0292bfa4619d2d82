"""REST: a customer's webhook endpoints under /v1/webhooks (the rules:
resolvers/webhooks/endpoints.py), snake_case as the rest of the REST contract."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.resolvers.webhooks import endpoints as ep

from .common import api_route, declared_body, page_info, services, viewer
from .contract import (
    BOOLEAN,
    CURSOR,
    INTEGER,
    PAGE_INFO,
    PAGE_SIZE,
    STRING,
    TIME,
    UUID,
    Operation,
    Param,
    Reply,
    array,
    nullable,
    obj,
)

EVENT_TYPE = {"enum": list(ep.EVENT_TYPES)}
EVENT_TYPES = {**array(EVENT_TYPE, len(ep.EVENT_TYPES)), "minItems": 1}
URL = {
    "type": "string",
    "maxLength": 2048,
    "description": "http(s); a non-public address is refused",
}
DESCRIPTION = {"type": "string", "maxLength": ep.DESCRIPTION_MAX}
ENDPOINT = obj(
    {
        "id": UUID,
        "url": STRING,
        "event_types": array(EVENT_TYPE),
        "project_id": {**nullable(UUID), "description": "null: every project's events"},
        "description": STRING,
        "status": {"enum": ["enabled", "disabled"]},
        "disabled_reason": nullable(STRING),
        "failing_since": {**nullable(TIME), "description": "the first failure since a success"},
        "created_at": TIME,
        "updated_at": TIME,
    }
)
ONE = obj({"endpoint": ENDPOINT})
WITH_SECRET = obj(
    {"endpoint": ENDPOINT, "secret": {**STRING, "description": "the signing key: shown once"}}
)
ATTEMPT = obj(
    {
        "attempt": INTEGER,
        "at": TIME,
        "status": {**nullable(INTEGER), "description": "the receiver's HTTP status"},
        "error": nullable(STRING),
        "latency_ms": INTEGER,
    }
)
DELIVERY_FIELDS = {
    "event_id": {**STRING, "description": "the webhook-id header"},
    "event_type": STRING,
    "event_at": TIME,
    "state": {"enum": ["pending", "delivered", "failed"]},
    "attempts": INTEGER,
    "last_status": nullable(INTEGER),
    "last_error": nullable(STRING),
    "last_latency_ms": nullable(INTEGER),
    "next_attempt_at": nullable(TIME),
    "delivered_at": nullable(TIME),
    "queued_at": TIME,
}
DELIVERY = obj(DELIVERY_FIELDS)
EVENT_ID = Param("event_id", "a delivery's event_id", {"type": "string", "maxLength": 100})
TAG = "webhooks"


def _op(method: str, path: str, summary: str, replies: dict[int, Reply], **more: Any) -> Operation:
    return Operation(method, path, summary, auth="customer", tag=TAG, replies=replies, **more)


LIST = _op(
    "GET",
    "/v1/webhooks",
    "The customer's webhook endpoints",
    {200: Reply("every endpoint in the token's scope", obj({"endpoints": array(ENDPOINT)}))},
)
CREATE = _op(
    "POST",
    "/v1/webhooks",
    "Add a webhook endpoint",
    {201: Reply("the endpoint and its signing secret (shown only now)", WITH_SECRET)},
    description="A project-limited token may only add endpoints filtered to its project.",
    body=obj(
        {"url": URL, "event_types": EVENT_TYPES},
        {
            "project_id": {**UUID, "description": "only this project's events"},
            "description": DESCRIPTION,
        },
    ),  # fmt: skip
    errors=(409,),
)
GET = _op("GET", "/v1/webhooks/{id}", "A webhook endpoint", {200: Reply("the endpoint", ONE)})
UPDATE = _op(
    "PATCH",
    "/v1/webhooks/{id}",
    "Change a webhook endpoint (the fields given)",
    {200: Reply("the endpoint", ONE)},
    description="enabled=true resumes a disabled endpoint and its pending deliveries.",
    body=obj(
        {},
        {"url": URL, "event_types": EVENT_TYPES, "description": DESCRIPTION, "enabled": BOOLEAN},
    ),
    body_required=False,
)
DELETE = _op("DELETE", "/v1/webhooks/{id}", "Delete a webhook endpoint", {204: Reply("deleted")})
DISABLE = _op(
    "POST",
    "/v1/webhooks/{id}/disable",
    "Stop delivering to an endpoint",
    {200: Reply("the endpoint", ONE)},
)
ROTATE = _op(
    "POST",
    "/v1/webhooks/{id}/rotate-secret",
    "A new signing secret (the old one also signs for a day)",
    {200: Reply("the endpoint and its new secret (shown only now)", WITH_SECRET)},
)
PING = _op(
    "POST",
    "/v1/webhooks/{id}/ping",
    "Send a webhook.test event to this endpoint",
    {202: Reply("queued", obj({"event_id": STRING}))},
)
REPLAY = _op(
    "POST",
    "/v1/webhooks/{id}/replay",
    "Send item result events again from a change-feed position",
    {
        202: Reply(
            "queued, with their original ids",
            obj(
                {
                    "queued": INTEGER,
                    "end_cursor": {**nullable(CURSOR), "description": "the last one queued"},
                    "has_more": {**BOOLEAN, "description": "call again after end_cursor"},
                }
            ),
        )
    },
    description=f"At most {ep.REPLAY_MAX} events per call.",
    body=obj({}, {"after": {**CURSOR, "description": "a change-feed cursor (default: start)"}}),
    body_required=False,
)
DELIVERIES = _op(
    "GET",
    "/v1/webhooks/{id}/deliveries",
    "A page of the endpoint's delivery log, newest first",
    {
        200: Reply(
            "a page",
            obj({"deliveries": array(DELIVERY), "page_info": PAGE_INFO}),
        )
    },
    query=(
        Param("first", "page size (default 100)", PAGE_SIZE),
        Param("after", "a page_info.end_cursor"),
    ),
)
ONE_DELIVERY = _op(
    "GET",
    "/v1/webhooks/{id}/deliveries/{event_id}",
    "One delivery and every attempt at it",
    {
        200: Reply(
            "the delivery, its attempts oldest first",
            obj({"delivery": obj({**DELIVERY_FIELDS, "attempt_log": array(ATTEMPT)})}),
        )
    },
    path_params=(EVENT_ID,),
)
REDELIVER = _op(
    "POST",
    "/v1/webhooks/{id}/deliveries/{event_id}/redeliver",
    "Send one event again now (the same id)",
    {202: Reply("queued", obj({"delivery": DELIVERY}))},
    path_params=(EVENT_ID,),
)


def _iso(value: Any) -> Any:
    return None if value is None else value.isoformat()


def _endpoint(row: Any) -> dict[str, Any]:
    f = ep.public_fields(row)
    return {
        **f,
        "id": str(f["id"]),
        "project_id": None if f["project_id"] is None else str(f["project_id"]),
        "failing_since": _iso(f["failing_since"]),
        "created_at": _iso(f["created_at"]),
        "updated_at": _iso(f["updated_at"]),
    }


def _delivery(r: Any, log: list[Any] | None = None) -> dict[str, Any]:
    out = {
        "event_id": r["event_id"],
        "event_type": r["type"],
        "event_at": _iso(r["event_at"]),
        "state": r["state"],
        "attempts": r["attempts"],
        "last_status": r["last_status"],
        "last_error": r["last_error"],
        "last_latency_ms": r["last_latency_ms"],
        "next_attempt_at": _iso(r["next_attempt_at"]) if r["state"] == "pending" else None,
        "delivered_at": _iso(r["delivered_at"]),
        "queued_at": _iso(r["queued_at"]),
    }
    if log is not None:
        out["attempt_log"] = [{**dict(a), "at": _iso(a["at"])} for a in log]
    return out


async def list_endpoints(request: Request) -> Response:
    rows = await ep.list_endpoints(services(request).db, await viewer(request))
    return JSONResponse({"endpoints": [_endpoint(r) for r in rows]})


async def create(request: Request) -> Response:
    s = services(request)
    who = await viewer(request)
    body = await declared_body(request, CREATE)
    made = await ep.create_endpoint(
        s.db, s.settings, who, body["url"], body["event_types"], body.get("project_id"),
        body.get("description"),
    )  # fmt: skip
    return JSONResponse({"endpoint": _endpoint(made.row), "secret": made.secret}, status_code=201)


async def get(request: Request) -> Response:
    row = await ep.get_endpoint(
        services(request).db, await viewer(request), request.path_params["id"]
    )
    return JSONResponse({"endpoint": _endpoint(row)})


async def delete(request: Request) -> Response:
    await ep.delete_endpoint(services(request).db, await viewer(request), request.path_params["id"])
    return Response(status_code=204)


async def update(request: Request) -> Response:
    s = services(request)
    who = await viewer(request)
    eid = request.path_params["id"]
    body = await declared_body(request, UPDATE)
    row = await ep.update_endpoint(
        s.db, s.settings, who, eid, body.get("url"), body.get("event_types"),
        body.get("description"), body.get("enabled"),
    )  # fmt: skip
    return JSONResponse({"endpoint": _endpoint(row)})


async def disable(request: Request) -> Response:
    who = await viewer(request)  # who first: a read-only token is refused before its body
    await declared_body(request, DISABLE)
    row = await ep.disable_endpoint(services(request).db, who, request.path_params["id"])
    return JSONResponse({"endpoint": _endpoint(row)})


async def rotate(request: Request) -> Response:
    who = await viewer(request)
    await declared_body(request, ROTATE)
    made = await ep.rotate_secret(services(request).db, who, request.path_params["id"])
    return JSONResponse({"endpoint": _endpoint(made.row), "secret": made.secret})


async def ping(request: Request) -> Response:
    who = await viewer(request)
    await declared_body(request, PING)
    event_id = await ep.ping(services(request).db, who, request.path_params["id"])
    return JSONResponse({"event_id": event_id}, status_code=202)


async def replay(request: Request) -> Response:
    who = await viewer(request)
    body = await declared_body(request, REPLAY)
    r = await ep.replay(services(request).db, who, request.path_params["id"], body.get("after"))
    return JSONResponse(
        {"queued": r.queued, "end_cursor": r.end_cursor, "has_more": r.has_more}, status_code=202
    )


async def deliveries(request: Request) -> Response:
    first = request.query_params.get("first", "100")
    after = request.query_params.get("after")
    page = await ep.deliveries_page(
        services(request).db, await viewer(request), request.path_params["id"], after, first
    )
    return JSONResponse(
        {"deliveries": [_delivery(r) for r in page.rows], "page_info": page_info(page)}
    )


async def delivery(request: Request) -> Response:
    row, log = await ep.delivery(
        services(request).db,
        await viewer(request),
        request.path_params["id"],
        request.path_params["event_id"],
    )
    return JSONResponse({"delivery": _delivery(row, log)})


async def redeliver(request: Request) -> Response:
    s = services(request)
    who = await viewer(request)
    await declared_body(request, REDELIVER)
    eid = request.path_params["id"]
    got = await ep.redeliver(s.db, who, eid, request.path_params["event_id"])
    row, _ = await ep.delivery(s.db, who, eid, got)
    return JSONResponse({"delivery": _delivery(row)}, status_code=202)


routes = [
    api_route(LIST, list_endpoints),
    api_route(CREATE, create),
    api_route(GET, get),
    api_route(UPDATE, update),
    api_route(DELETE, delete),
    api_route(DISABLE, disable),
    api_route(ROTATE, rotate),
    api_route(PING, ping),
    api_route(REPLAY, replay),
    api_route(DELIVERIES, deliveries),
    api_route(ONE_DELIVERY, delivery),
    api_route(REDELIVER, redeliver),
]
