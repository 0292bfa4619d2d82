"""REST: customers' projects."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.errors import BadInput
from taskroute.resolvers import batches, ingest, projects, quote
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.layouts import KEY_MAX, LAYOUTS

from .common import api_route, declared_body, services, viewer
from .contract import (
    BOOLEAN,
    INGEST,
    INTEGER,
    NUMBER,
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


def _int(lo: int, hi: int, default: int) -> dict[str, object]:
    return {"type": "integer", "minimum": lo, "maximum": hi, "default": default}


DAY = 86400
TOO_FAST_POLICIES = ("count", "exclude")
CANDIDATE_KEYS = {
    **array({"type": "string", "minLength": 1, "maxLength": KEY_MAX}, 2),
    "minItems": 2,
}
ETAS = {
    "eta": nullable(TIME),
    "eta_early": nullable(TIME),
    "eta_late": nullable(TIME),
}
QUOTE = obj(
    {
        "items": {**INTEGER, "description": "work items (gold excluded)"},
        "gold_items": INTEGER,
        "slots": {**INTEGER, "description": "answers needed: items x redundancy"},
        "deadline": nullable(TIME),
        **ETAS,
        "meets_deadline": BOOLEAN,
        "by_skill": array(
            obj(
                {
                    "skill": STRING,
                    "items": INTEGER,
                    "slots": INTEGER,
                    "present_experts": INTEGER,
                    **ETAS,
                    "extra_experts_needed": {
                        **nullable(INTEGER),
                        "description": "more experts of this skill for the deadline",
                    },
                    "reason": {**nullable(STRING), "description": "why there is no ETA"},
                }
            )
        ),
        "expected_gold_answers": NUMBER,
        "expected_adjudications": NUMBER,
        "pay_cents": INTEGER,
        "base_cost_cents": INTEGER,
        "gold_cost_cents": INTEGER,
        "adjudication_cost_cents": INTEGER,
        "expected_cost_cents": INTEGER,
    }
)
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
            # releases, caps and guards (docs/quality-and-payment.md)
            "flag_after_bad_item_releases": _int(1, 100, 2),
            "max_items_per_expert": {
                **nullable({"type": "integer", "minimum": 1, "maximum": 10_000_000}),
                "description": "items one expert may answer in this project; null: no cap",
            },
            "min_seconds_per_task": {
                **nullable({"type": "integer", "minimum": 1, "maximum": DAY}),
                "description": "an answer sooner than this after the claim is too fast",
            },
            "too_fast_policy": {"enum": list(TOO_FAST_POLICIES), "default": "count"},
            # how the workbench presents the tasks, and review by experts
            "layout": {"enum": list(LAYOUTS), "default": "GENERIC"},
            "candidate_keys": {
                **nullable(CANDIDATE_KEYS),
                "description": "PAIRWISE only: the payload keys of the two candidates "
                "(null: a and b)",
            },
            "expert_review": {
                "type": "boolean",
                "default": False,
                "description": "on_review only: route each answer's review to experts "
                "holding review:<skill>",
            },
            "review_pay_cents": _int(0, 10_000_000, 0),
            "pay_corrected": {"type": "boolean", "default": False},
        },
    ),
    query=(
        Param(
            "dry_run",
            "true: run the same checks and answer a quote (ETA, deadline verdict, cost); "
            "nothing is written",
            {"type": "boolean", "default": False},
        ),
    ),
    replies={
        200: Reply("dry_run=true: the quote; nothing was written", obj({"quote": QUOTE})),
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
                    "flag_after_bad_item_releases": INTEGER,
                    "max_items_per_expert": nullable(INTEGER),
                    "min_seconds_per_task": nullable(INTEGER),
                    "too_fast_policy": {"enum": list(TOO_FAST_POLICIES)},
                    "layout": {"enum": list(LAYOUTS)},
                    "candidate_keys": nullable(CANDIDATE_KEYS),
                    "expert_review": BOOLEAN,
                    "review_pay_cents": INTEGER,
                    "pay_corrected": BOOLEAN,
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
    dry_run = request.query_params.get("dry_run", "false")
    if dry_run not in ("true", "false"):
        raise BadInput("dry_run must be true or false", field="dry_run")
    spec = v.project_spec(
        await declared_body(request, CREATE_PROJECT),
        s.settings.max_tasks_per_request,
        s.settings.max_payload_bytes,
    )
    if dry_run == "true":  # the same checks, then a quote instead of a project
        return JSONResponse(
            {"quote": _quote_json(await quote.quote(s.db, s.settings, customer_id, spec))}
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
            # releases, caps and guards (docs/quality-and-payment.md)
            "flag_after_bad_item_releases": row["flag_after_bad_item_releases"],
            "max_items_per_expert": row["max_items_per_expert"],
            "min_seconds_per_task": row["min_seconds_per_task"],
            "too_fast_policy": row["too_fast_policy"],
            # how the workbench presents the tasks, and review by experts
            "layout": row["layout"],
            "candidate_keys": row["candidate_keys"],
            "expert_review": row["expert_review"],
            "review_pay_cents": row["review_pay_cents"],
            "pay_corrected": row["pay_corrected"],
            # how long payloads outlive the project, and whether they are gone
            "payload_retention_seconds": int(row["payload_retention"].total_seconds()),
            "payloads_deleted_at": (
                row["payloads_purged_at"].isoformat() if row["payloads_purged_at"] else None
            ),
        }
    )


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _quote_json(q: quote.Quote) -> dict[str, Any]:
    """GraphQL's Quote in snake_case (docs/api.md)."""
    body = dataclasses.asdict(q)
    body["meets_deadline"] = body.pop("on_track")
    for name in ("deadline", "eta", "eta_early", "eta_late"):
        body[name] = _iso(body[name])
    for s in body["by_skill"]:
        s["extra_experts_needed"] = s.pop("extra_experts")
        for name in ("eta", "eta_early", "eta_late"):
            s[name] = _iso(s[name])
    return body


routes = [
    api_route(CREATE_PROJECT, create_project),
    api_route(GET_PROJECT, get_project),
]
