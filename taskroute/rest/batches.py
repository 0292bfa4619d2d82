"""REST of batches: add tasks, fetch a large payload, read the audit log."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from taskroute.resolvers import batches, ingest, payload_audit, payloads
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, json_object, page_info, page_size, services, viewer


async def add_tasks(request: Request) -> Response:
    customer_id = (await viewer(request)).require_customer()
    s = services(request)
    project_id = parse_id(request.path_params["id"], "project")
    body = await json_object(request, {"tasks"}, required={"tasks"})
    specs = v.task_specs(
        body["tasks"], s.settings.max_tasks_per_request, s.settings.max_payload_bytes
    )
    added = await batches.add_tasks(s, customer_id, project_id, specs)
    out: dict[str, Any] = {
        "project_id": str(project_id),
        "status_url": f"/v1/projects/{project_id}",
    }
    if added.accepted:
        out["job_id"] = str(added.job_id)
        out["ingest"] = await ingest.status(s.db, project_id)
        return JSONResponse(out, status_code=202)
    out["added"] = added.added
    return JSONResponse(out, status_code=201)


async def get_payload(request: Request) -> Response:
    """A large payload, for the expert holding the live lease (signed, expiring URL)."""
    expert_id = (await viewer(request)).require_expert()
    s = services(request)
    assignment_id = parse_id(request.path_params["id"], "payload link")
    fetched = await payloads.fetch(
        s.db,
        batches.blobs_of(s),
        s.payload_urls,
        expert_id,
        assignment_id,
        request.query_params.get("exp"),
        request.query_params.get("sig"),
    )
    no_store = {"Cache-Control": "no-store"}
    if fetched.redirect is not None:
        return RedirectResponse(fetched.redirect, status_code=307, headers=no_store)
    return Response(fetched.data, media_type="application/json", headers=no_store)


def _uuid_param(request: Request, name: str, what: str) -> Any:
    raw = request.query_params.get(name)
    return parse_id(raw, what) if raw else None


async def audit_log(request: Request) -> Response:
    """A page of the payload audit: `?first=&after=` and `page_info`, as GraphQL's payloadAudit;
    `limit`, `next_cursor` and each entry's `cursor` (raw numbers) are the deprecated forms."""
    scope = (await viewer(request)).customer_scope()
    s = services(request)
    first, field = page_size(request)
    page = await payload_audit.audit_page(
        s.db,
        scope,
        _uuid_param(request, "project_id", "project"),
        _uuid_param(request, "expert_id", "expert"),
        request.query_params.get("after"),
        first,
        field,
    )
    entries = [
        {
            "cursor": str(r["seq"]),
            "expert_id": str(r["expert_id"]),
            "customer_id": str(r["customer_id"]),
            "project_id": str(r["project_id"]),
            "task_id": str(r["task_id"]),
            "action": r["action"],
            "at": r["at"].isoformat(),
        }
        for r in page.rows
    ]
    return JSONResponse(
        {
            "entries": entries,
            "page_info": page_info(page),
            "next_cursor": payload_audit.entry_seq_next_cursor(page),
        }
    )


routes = [
    api_route("/v1/projects/{id}/tasks", add_tasks, methods=["POST"]),
    api_route("/v1/payloads/{id}", get_payload, methods=["GET"], query=("exp", "sig")),
    api_route(
        "/v1/audit-log",
        audit_log,
        methods=["GET"],
        query=("first", "limit", "after", "project_id", "expert_id"),
    ),
]
