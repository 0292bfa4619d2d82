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

from .common import api_route, json_body, services, viewer


async def create_project(request: Request) -> Response:
    customer_id = (await viewer(request)).require_customer()
    s = services(request)
    dry_run = request.query_params.get("dry_run", "false")
    if dry_run not in ("true", "false"):
        raise BadInput("dry_run must be true or false", field="dry_run")
    spec = v.project_spec(
        await json_body(request), s.settings.max_tasks_per_request, s.settings.max_payload_bytes
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
    api_route("/v1/projects", create_project, methods=["POST"], query=("dry_run",)),
    api_route("/v1/projects/{id}", get_project, methods=["GET"]),
]
