"""REST: a customer's webhook endpoints under /v1/webhooks (the rules:
resolvers/webhooks/endpoints.py), snake_case as the rest of the REST contract."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.resolvers.webhooks import endpoints as ep

from .common import api_route, json_object, page_info, services, viewer


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


async def list_or_create(request: Request) -> Response:
    s = services(request)
    who = await viewer(request)
    if request.method == "GET":
        rows = await ep.list_endpoints(s.db, who)
        return JSONResponse({"endpoints": [_endpoint(r) for r in rows]})
    body = await json_object(
        request,
        {"url", "event_types", "project_id", "description"},
        required={"url", "event_types"},
    )
    made = await ep.create_endpoint(
        s.db, s.settings, who, body["url"], body["event_types"], body.get("project_id"),
        body.get("description"),
    )  # fmt: skip
    return JSONResponse({"endpoint": _endpoint(made.row), "secret": made.secret}, status_code=201)


async def one(request: Request) -> Response:
    s = services(request)
    who = await viewer(request)
    eid = request.path_params["id"]
    if request.method == "GET":
        return JSONResponse({"endpoint": _endpoint(await ep.get_endpoint(s.db, who, eid))})
    if request.method == "DELETE":
        await ep.delete_endpoint(s.db, who, eid)
        return Response(status_code=204)
    body = await json_object(request, {"url", "event_types", "description", "enabled"})
    row = await ep.update_endpoint(
        s.db, s.settings, who, eid, body.get("url"), body.get("event_types"),
        body.get("description"), body.get("enabled"),
    )  # fmt: skip
    return JSONResponse({"endpoint": _endpoint(row)})


async def disable(request: Request) -> Response:
    who = await viewer(request)  # who first: a read-only token is refused before its body
    await json_object(request, set())
    row = await ep.disable_endpoint(services(request).db, who, request.path_params["id"])
    return JSONResponse({"endpoint": _endpoint(row)})


async def rotate(request: Request) -> Response:
    who = await viewer(request)
    await json_object(request, set())
    made = await ep.rotate_secret(services(request).db, who, request.path_params["id"])
    return JSONResponse({"endpoint": _endpoint(made.row), "secret": made.secret})


async def ping(request: Request) -> Response:
    who = await viewer(request)
    await json_object(request, set())
    event_id = await ep.ping(services(request).db, who, request.path_params["id"])
    return JSONResponse({"event_id": event_id}, status_code=202)


async def replay(request: Request) -> Response:
    who = await viewer(request)
    body = await json_object(request, {"after"})
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
    await json_object(request, set())
    eid = request.path_params["id"]
    got = await ep.redeliver(s.db, who, eid, request.path_params["event_id"])
    row, _ = await ep.delivery(s.db, who, eid, got)
    return JSONResponse({"delivery": _delivery(row)}, status_code=202)


routes = [
    api_route("/v1/webhooks", list_or_create, methods=["GET", "POST"]),
    api_route("/v1/webhooks/{id}", one, methods=["GET", "PATCH", "DELETE"]),
    api_route("/v1/webhooks/{id}/disable", disable, methods=["POST"]),
    api_route("/v1/webhooks/{id}/rotate-secret", rotate, methods=["POST"]),
    api_route("/v1/webhooks/{id}/ping", ping, methods=["POST"]),
    api_route("/v1/webhooks/{id}/replay", replay, methods=["POST"]),
    api_route(
        "/v1/webhooks/{id}/deliveries", deliveries, methods=["GET"], query=("first", "after")
    ),
    api_route("/v1/webhooks/{id}/deliveries/{event_id}", delivery, methods=["GET"]),
    api_route("/v1/webhooks/{id}/deliveries/{event_id}/redeliver", redeliver, methods=["POST"]),
]
