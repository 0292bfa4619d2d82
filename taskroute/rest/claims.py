"""REST: the expert's claim loop."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.errors import BadInput
from taskroute.resolvers import claims, instructions
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, json_object, services, viewer


def _claim_json(c: claims.Claim, given: instructions.Instructions | None) -> dict[str, Any]:
    t = c.task
    return {
        "assignment_id": str(c.assignment_id),
        "lease_until": c.lease_until.isoformat(),
        "task": {
            "id": str(t.id),
            "project_id": str(t.project_id),
            "skill": t.skill,
            "priority": t.priority,
            "payload": t.payload,
            "payload_url": t.payload_url,
            "answer_schema": t.answer_schema,
            "layout": t.layout,
            "candidate_keys": list(t.candidate_keys) if t.candidate_keys else None,
            "candidate_order": t.candidate_order,
            "review_of": None
            if t.review_of is None
            else {"answer": t.review_of.answer, "candidate_order": t.review_of.candidate_order},
            # the version this claim was given under (null: none); cached per process
            "instructions": None
            if given is None
            else {
                "version": given.version,
                "markdown": given.markdown,
                "allow_remote_images": given.allow_remote_images,
            },
        },
    }


def _receipt_json(r: claims.Receipt) -> dict[str, Any]:
    return {
        "id": str(r.id),
        "assignment_id": str(r.assignment_id),
        "submitted_at": r.submitted_at.isoformat(),
        "pay_cents": r.pay_cents,
        "pay_status": r.pay_status,
        "duplicate": r.duplicate,
        "answer_differs": r.answer_differs,
    }


async def next_task(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    body = await json_object(request, {"project_id", "skills"})
    raw_scope = body.get("project_id")
    if raw_scope is not None and not isinstance(raw_scope, str):
        raise BadInput("project_id must be a string", field="project_id")
    scope = parse_id(raw_scope, "project") if raw_scope is not None else None
    s = services(request)
    claim = await claims.claim_next(
        s.db, expert_id, v.skills_filter(body.get("skills")), scope, s.payload_urls
    )
    if claim is None:
        retry = str(services(request).settings.retry_after)
        return Response(status_code=204, headers={"Retry-After": retry})
    given = await instructions.get(s.db, claim.task.project_id, claim.task.instructions_version)
    return JSONResponse(_claim_json(claim, given))


async def heartbeat(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    assignment_id = parse_id(request.path_params["id"], "assignment")
    lease = await claims.heartbeat(services(request).db, expert_id, assignment_id)
    return JSONResponse(
        {
            "assignment_id": str(lease.assignment_id),
            "lease_until": lease.lease_until.isoformat(),
            "has_high_priority_tasks": lease.has_high_priority_tasks,
        }
    )


async def submit(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    assignment_id = parse_id(request.path_params["id"], "assignment")
    body = await json_object(request, {"answer"}, required={"answer"})
    receipt = await claims.submit(services(request).db, expert_id, assignment_id, body["answer"])
    return JSONResponse(_receipt_json(receipt))


async def release(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    assignment_id = parse_id(request.path_params["id"], "assignment")
    body = await json_object(request, {"reason"}, required={"reason"})
    s = services(request)
    r = await claims.release(
        s.db, expert_id, assignment_id, body["reason"], s.settings.releases_per_hour
    )
    return JSONResponse(
        {
            "assignment_id": str(r.assignment_id),
            "reason": r.reason,
            "releases_left": r.releases_left,
            "resets_at": r.resets_at.isoformat(),
        }
    )


routes = [
    api_route("/v1/tasks/next", next_task, methods=["POST"]),
    api_route("/v1/assignments/{id}/heartbeat", heartbeat, methods=["POST"]),
    api_route("/v1/assignments/{id}/submit", submit, methods=["POST"]),
    api_route("/v1/assignments/{id}/release", release, methods=["POST"]),
]
