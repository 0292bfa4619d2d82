"""REST of batches: add tasks, fetch a large payload, read the audit log."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from taskroute.resolvers import batches, ingest, payload_audit, payloads
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, declared_body, page_info, page_size, services, viewer
from .contract import (
    ANY_JSON,
    CURSOR,
    INGEST,
    INTEGER,
    PAGE_INFO,
    PAGE_SIZE,
    STRING,
    TASK_INPUT,
    TIME,
    UUID,
    Operation,
    Param,
    Reply,
    array,
    nullable,
    obj,
)

ADDED = {"project_id": UUID, "status_url": STRING}
ADD_TASKS = Operation(
    "POST",
    "/v1/projects/{id}/tasks",
    "Add tasks to a project",
    auth="customer",
    tag="projects",
    body=obj({"tasks": array(TASK_INPUT)}),
    errors=(409,),
    replies={
        201: Reply("stored", obj({**ADDED, "added": INTEGER})),
        202: Reply(
            "being stored in the background", obj({**ADDED, "job_id": UUID, "ingest": INGEST})
        ),
    },
)
GET_PAYLOAD = Operation(
    "GET",
    "/v1/payloads/{id}",
    "A large payload, by the signed link a claim gave",
    auth="expert",
    tag="claims",
    description="For the expert holding the live lease; `id` is the assignment.",
    query=(Param("exp", "the link's expiry"), Param("sig", "the link's signature")),
    errors=(410,),
    replies={
        200: Reply("the payload", ANY_JSON),
        307: Reply("the payload's address in the blob store", headers=("Location",)),
    },
)
AUDIT_LOG = Operation(
    "GET",
    "/v1/audit-log",
    "A page of the payload audit (who received which payload)",
    auth="customer or admin",
    tag="projects",
    query=(
        Param("first", "page size (default 100)", PAGE_SIZE),
        Param("limit", "deprecated: first", PAGE_SIZE),
        Param("after", "a page_info.end_cursor"),
        Param("project_id", "only this project", UUID),
        Param("expert_id", "only this expert", UUID),
    ),
    replies={
        200: Reply(
            "a page, oldest first",
            obj(
                {
                    "entries": array(
                        obj(
                            {
                                "cursor": {**CURSOR, "deprecated": True},
                                "expert_id": UUID,
                                "customer_id": UUID,
                                "project_id": UUID,
                                "task_id": UUID,
                                "action": STRING,
                                "at": TIME,
                            }
                        )
                    ),
                    "page_info": PAGE_INFO,
                    "next_cursor": {**nullable(CURSOR), "deprecated": True},
                }
            ),
        )
    },
)


async def add_tasks(request: Request) -> Response:
    customer_id = (await viewer(request)).require_customer()
    s = services(request)
    project_id = parse_id(request.path_params["id"], "project")
    body = await declared_body(request, ADD_TASKS)
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
    api_route(ADD_TASKS, add_tasks),
    api_route(GET_PAYLOAD, get_payload),
    api_route(AUDIT_LOG, audit_log),
]
