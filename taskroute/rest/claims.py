"""REST: the expert's claim loop."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.errors import BadInput
from taskroute.resolvers import claims, instructions
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import parse_id
from taskroute.resolvers.layouts import LAYOUTS

from .common import api_route, declared_body, services, viewer
from .contract import (
    ANY_JSON,
    BOOLEAN,
    INTEGER,
    STRING,
    TIME,
    UUID,
    Operation,
    Reply,
    array,
    nullable,
    obj,
)

ORDER: dict[str, Any] = {"enum": ["ab", "ba"]}
CLAIM = obj(
    {
        "assignment_id": UUID,
        "lease_until": TIME,
        "task": obj(
            {
                "id": UUID,
                "project_id": UUID,
                "skill": STRING,
                "priority": INTEGER,
                "payload": {**ANY_JSON, "description": "null when payload_url is given"},
                "payload_url": nullable(STRING),
                "answer_schema": {**ANY_JSON, "description": "null: any JSON answer"},
                "layout": {
                    "enum": list(LAYOUTS),
                    "description": "how the workbench presents the task",
                },
                "candidate_keys": {
                    **nullable(array(STRING, 2)),
                    "description": "PAIRWISE: the payload keys of the two candidates",
                },
                "candidate_order": {
                    **nullable(ORDER),
                    "description": "PAIRWISE: the order shown to this assignment "
                    '("ab": a on the left)',
                },
                "review_of": {
                    **nullable(obj({"answer": {**ANY_JSON}, "candidate_order": nullable(ORDER)})),
                    "description": "a review task: the answer under review and the order "
                    "its expert saw; null for other work",
                },
                "instructions": {
                    **nullable(
                        obj(
                            {
                                "version": INTEGER,
                                "markdown": STRING,
                                "allow_remote_images": BOOLEAN,
                            }
                        )
                    ),
                    "description": "the project's instructions (Markdown) at the version "
                    "this claim was given under; null: the project has none",
                },
            }
        ),
    }
)
NEXT_TASK = Operation(
    "POST",
    "/v1/tasks/next",
    "Claim the next task",
    auth="expert",
    tag="claims",
    description="Claims the most pressing task the expert may take (or returns the one held). "
    "No body: any skill, any project.",
    body=obj(
        {},
        {
            "project_id": {**UUID, "description": "only this project's tasks"},
            "skills": {**array(STRING, 200), "description": "only these skills"},
        },
    ),
    body_required=False,
    replies={
        200: Reply("the claim and its lease", CLAIM),
        204: Reply("no task now: ask again after Retry-After seconds", headers=("Retry-After",)),
    },
)
HEARTBEAT = Operation(
    "POST",
    "/v1/assignments/{id}/heartbeat",
    "Extend a claim's lease",
    auth="expert",
    tag="claims",
    errors=(409,),
    replies={
        200: Reply(
            "the new lease",
            obj(
                {
                    "assignment_id": UUID,
                    "lease_until": TIME,
                    "has_high_priority_tasks": BOOLEAN,
                }
            ),
        )
    },
)
SUBMIT = Operation(
    "POST",
    "/v1/assignments/{id}/submit",
    "Submit the answer of a claim",
    auth="expert",
    tag="claims",
    body=obj({"answer": {**ANY_JSON, "description": "must match the task's answer_schema"}}),
    errors=(409,),
    replies={
        200: Reply(
            "the receipt",
            obj(
                {
                    "id": UUID,
                    "assignment_id": UUID,
                    "submitted_at": TIME,
                    "pay_cents": INTEGER,
                    "pay_status": {
                        "enum": ["paid", "pending_review", "pending_resolution"],
                    },
                    "duplicate": {
                        **BOOLEAN,
                        "description": "a repeated submit: this is the first answer's receipt",
                    },
                    "answer_differs": {
                        **BOOLEAN,
                        "description": "a repeated submit whose answer differs from the "
                        "stored one (which stands)",
                    },
                }
            ),
        )
    },
)
RELEASE = Operation(
    "POST",
    "/v1/assignments/{id}/release",
    "Give a claim back (skip, can't answer, bad item)",
    auth="expert",
    tag="claims",
    description="The task reopens at once without a failed attempt and is never offered to "
    "this expert again. Releases are bounded per expert per hour (429 TOO_MANY_RELEASES with "
    "resetsAt in details).",
    body=obj({"reason": {"enum": list(claims.RELEASE_REASONS)}}),
    errors=(409, 429),
    replies={
        200: Reply(
            "released",
            obj(
                {
                    "assignment_id": UUID,
                    "reason": {"enum": list(claims.RELEASE_REASONS)},
                    "releases_left": {**INTEGER, "description": "this hour"},
                    "resets_at": {
                        **TIME,
                        "description": "when the oldest counted release stops counting",
                    },
                }
            ),
        )
    },
)


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
    body = await declared_body(request, NEXT_TASK)
    raw_scope = body.get("project_id")
    if raw_scope is not None and not isinstance(raw_scope, str):
        raise BadInput("project_id must be a string", field="project_id")
    scope = parse_id(raw_scope, "project") if raw_scope is not None else None
    s = services(request)
    claim = await claims.claim_next(
        s.db, expert_id, v.skills_filter(body.get("skills")), scope, s.payload_urls, s.held_claims
    )
    if claim is None:
        retry = str(services(request).settings.retry_after)
        return Response(status_code=204, headers={"Retry-After": retry})
    given = await instructions.get(s.db, claim.task.project_id, claim.task.instructions_version)
    return JSONResponse(_claim_json(claim, given))


async def heartbeat(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    assignment_id = parse_id(request.path_params["id"], "assignment")
    s = services(request)
    lease = await claims.heartbeat(s.db, expert_id, assignment_id, s.held_claims)
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
    body = await declared_body(request, SUBMIT)
    s = services(request)
    receipt = await claims.submit(s.db, expert_id, assignment_id, body["answer"], s.held_claims)
    return JSONResponse(_receipt_json(receipt))


async def release(request: Request) -> Response:
    expert_id = (await viewer(request)).require_expert()
    assignment_id = parse_id(request.path_params["id"], "assignment")
    body = await declared_body(request, RELEASE)
    s = services(request)
    r = await claims.release(
        s.db,
        expert_id,
        assignment_id,
        body["reason"],
        s.settings.releases_per_hour,
        s.held_claims,
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
    api_route(NEXT_TASK, next_task),
    api_route(HEARTBEAT, heartbeat),
    api_route(SUBMIT, submit),
    api_route(RELEASE, release),
]
