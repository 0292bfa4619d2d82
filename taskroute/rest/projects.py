"""REST: customers' projects."""

from __future__ import annotations

from datetime import datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.resolvers import batches, ingest, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, declared_body, services, viewer
from .contract import (
    BOOLEAN,
    INGEST,
    INTEGER,
    STRING,
    TASK_INPUT,
    TIME,
    UUID,
    Operation,
    Reply,
    array,
    nullable,
    obj,
)


def _int(lo: int, hi: int, default: int) -> dict[str, object]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default}


DAY = 86400
CREATED = obj({"project_id": UUID, "status": STRING, "status_url": STRING})
CREATE_PROJECT = Operation(
    "POST",
    "/v1/projects",
    "Create a project (and its first tasks)",
    auth="customer",
    tag="projects",
    description="A large batch of tasks is stored in the background (202: follow status_url).",
    # validation.project_spec's fields and bounds
    body=obj(
        {"name": {"type": "string", "minLength": 1, "maxLength": v.NAME_MAX}},
        {
            "deadline": {**TIME, "description": "ISO 8601 with a time zone"},
            "priority": _int(*v.PRIORITY_RANGE, 0),
            "priority_class": {"enum": sorted(v.PRIORITY_CLASSES)},
            "lease_seconds": _int(1, 7 * DAY, 1800),
            "pay_cents": _int(0, 10_000_000, 0),
            "min_quality": {"type": "number", "minimum": 0, "maximum": 1, "default": 0},
            "redundancy": _int(1, 5, 1),
            "max_retries": _int(0, 100, 3),
            "heartbeat_timeout_seconds": _int(1, 7 * DAY, 300),
            "tasks": array(TASK_INPUT),
            "answer_schema": {"type": "object", "description": "a JSON Schema for answers"},
            "payment_policy": {"enum": list(v.PAYMENT_POLICIES), "default": "on_submit"},
            "auto_approve_seconds": _int(0, 30 * DAY, 3 * DAY),
            "override_seconds": _int(0, 365 * DAY, 30 * DAY),
            "pay_adjudicated_disagreements": {"type": "boolean", "default": True},
            "payload_retention_seconds": _int(0, v.PAYLOAD_RETENTION_MAX, 30 * DAY),
        },
    ),
    replies={
        201: Reply("created with its tasks", CREATED),
        202: Reply("created; its tasks are being stored in the background", CREATED),
    },
)
GET_PROJECT = Operation(
    "GET",
    "/v1/projects/{id}",
    "A project's status, progress and settings",
    auth="any token",
    tag="projects",
    replies={
        200: Reply(
            "the project",
            obj(
                {
                    "project_id": UUID,
                    "name": STRING,
                    "status": STRING,
                    "completed_at": nullable(TIME),
                    "deadline": nullable(TIME),
                    "progress": {
                        "type": "object",
                        "description": "task counts by state",
                        "additionalProperties": INTEGER,
                    },
                    "ingest": INGEST,
                    "answer_schema": {"description": "a JSON Schema, or null: any JSON"},
                    "pay_cents": INTEGER,
                    "payment_policy": STRING,
                    "auto_approve_seconds": INTEGER,
                    "override_seconds": INTEGER,
                    "pay_adjudicated_disagreements": BOOLEAN,
                    "payload_retention_seconds": INTEGER,
                    "payloads_deleted_at": nullable(TIME),
                }
            ),
        )
    },
)


async def create_project(request: Request) -> Response:
    customer_id = (await viewer(request)).require_customer()
    s = services(request)
    spec = v.project_spec(
        await declared_body(request, CREATE_PROJECT),
        s.settings.max_tasks_per_request,
        s.settings.max_payload_bytes,
    )
    created = await batches.create_project(s, customer_id, spec)
    project_id = str(created.project["id"])
    body = {
        "project_id": project_id,
        "status": created.project["status"],
        "status_url": f"/v1/projects/{project_id}",
    }
    return JSONResponse(body, status_code=202 if created.accepted else 201)


async def get_project(request: Request) -> Response:
    who = await viewer(request)
    s = services(request)
    project_id = parse_id(request.path_params["id"], "project")
    # One snapshot: status, progress and ingest state agree (no "done" job on an
    # "ingesting" project when the ingest commits between two reads).
    async with s.db.snapshot() as snap:
        row = await projects.get_project(snap, project_id, who.customer_scope())
        progress = await projects.progress(snap, project_id)
        ingest_state = await ingest.status(snap, project_id)
    return JSONResponse(
        {
            "project_id": str(row["id"]),
            "name": row["name"],
            "status": row["status"],
            "completed_at": _iso(row["completed_at"]),
            "deadline": _iso(row["deadline"]),
            "progress": {k: v for k, v in progress.items() if k not in ("status", "completed_at")},
            "ingest": ingest_state,
            "answer_schema": row["answer_schema"],
            # when work is paid (docs/quality-and-payment.md)
            "pay_cents": row["pay_cents"],
            "payment_policy": row["payment_policy"],
            "auto_approve_seconds": row["auto_approve_seconds"],
            "override_seconds": row["override_seconds"],
            "pay_adjudicated_disagreements": row["pay_adjudicated_disagreements"],
            # how long payloads outlive the project, and whether they are gone
            "payload_retention_seconds": int(row["payload_retention"].total_seconds()),
            "payloads_deleted_at": (
                row["payloads_purged_at"].isoformat() if row["payloads_purged_at"] else None
            ),
        }
    )


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


routes = [
    api_route(CREATE_PROJECT, create_project),
    api_route(GET_PROJECT, get_project),
]
