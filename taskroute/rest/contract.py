"""What a REST route promises, declared once: the route's registration (`common.api_route`:
allowed query parameters; `common.declared_body`: allowed and required body fields) and the
OpenAPI document (`openapi.py`) both read an `Operation`, so the two cannot drift.

Bodies are still checked by the domain (`resolvers/validation.py`, one message per rule for
both APIs); the JSON Schemas here describe what those checks accept, and the tests send
valid requests and validate every answer against the schema documented for its status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]

# --- schema shorthands -------------------------------------------------------------------


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """A closed object: the named properties, those of `required` required."""
    schema: Schema = {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = sorted(required)
    return schema


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: Schema, max_items: int | None = None) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
ANY_JSON: Schema = {"description": "any JSON value"}
UUID: Schema = {"type": "string", "format": "uuid"}
TIME: Schema = {"type": "string", "format": "date-time"}
CURSOR: Schema = {"type": "string", "description": "an opaque cursor"}
PAGE_SIZE: Schema = {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
PAGE_INFO = obj({"has_next_page": BOOLEAN, "end_cursor": nullable(CURSOR)})

# The error body of every refusal (`common.error_response`).
ERROR: Schema = obj(
    {
        "error": obj(
            {
                "code": {"type": "string", "description": "as GraphQL's extensions.code"},
                "message": STRING,
            },
            {"details": {"type": "object", "description": "e.g. the offending field"}},
        )
    }
)

# --- the declaration ---------------------------------------------------------------------

ROLES = ("expert", "customer", "admin", "customer or admin", "any token")


@dataclass(frozen=True)
class Param:
    """A query parameter, or a path parameter that is not a UUID (`Operation.path_params`)."""

    name: str
    description: str
    schema: Schema = field(default_factory=lambda: dict(STRING))


@dataclass(frozen=True)
class Reply:
    description: str
    schema: Schema | None = None  # the JSON body; None: no body (or not JSON, see `media`)
    media: str = "application/json"
    # a streamed body of JSON lines: the schema of one line (documented as x-line-schema)
    line_schema: Schema | None = None
    headers: tuple[str, ...] = ()
    # the same status in other media types (a `format` query parameter picks one)
    other_media: tuple[tuple[str, Schema], ...] = ()


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    auth: str  # who may call it, one of ROLES
    tag: str
    replies: dict[int, Reply]
    query: tuple[Param, ...] = ()
    # path parameters that are not UUIDs (every other one is)
    path_params: tuple[Param, ...] = ()
    body: Schema | None = None  # the JSON body's schema (an object); None: no body
    body_required: bool = True
    errors: tuple[int, ...] = ()  # refusals beyond those every route may answer
    description: str = ""

    def __post_init__(self) -> None:
        assert self.auth in ROLES, self.auth
        assert self.body is None or self.body.get("type") == "object", self.path
        assert all(f"{{{p.name}}}" in self.path for p in self.path_params), self.path

    @property
    def query_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.query)

    @property
    def body_fields(self) -> set[str]:
        return set((self.body or {}).get("properties", {}))

    @property
    def required_fields(self) -> frozenset[str]:
        return frozenset((self.body or {}).get("required", ()))

    def error_statuses(self) -> list[int]:
        """Every refusal this route may answer: authentication and scope (401, 403), not found
        or not visible (404: also an admin route to anyone else), bad input (422), a busy or
        restarting server (503), and a body over the limit (413) where a body is read."""
        statuses = {401, 403, 404, 422, 503, *self.errors}
        if self.body is not None:
            statuses.add(413)
        return sorted(statuses)


ERROR_MEANINGS = {
    400: "a malformed request",
    401: "no valid bearer token (UNAUTHENTICATED)",
    403: "the token may not do this (FORBIDDEN)",
    404: "not found, or not visible to this token (NOT_FOUND)",
    409: "a conflict with the current state (e.g. LEASE_EXPIRED, ALREADY_SUBMITTED, "
    "PROJECT_CANCELED, CONFLICT)",
    410: "gone: the link expired or the payload was deleted (LINK_EXPIRED, PAYLOAD_DELETED)",
    429: "too many: a per-hour allowance is used up (TOO_MANY_RELEASES, with resetsAt)",
    413: "the request body is over the server's limit (PAYLOAD_TOO_LARGE)",
    422: "bad input, naming the field in details (BAD_INPUT)",
    503: "busy, overloaded or restarting: retry after Retry-After seconds (UNAVAILABLE)",
}


# --- schemas several routes share --------------------------------------------------------


def _task_input() -> Schema:
    """One task of createProject / addTasks / gold (validation.task_spec)."""
    from taskroute.resolvers import validation as v

    lo, hi = v.PRIORITY_RANGE
    skill = {"type": "string", "pattern": v.SKILL_RE.pattern}
    return obj(
        {"skill": skill, "payload": {**ANY_JSON, "description": "any JSON value but null"}},
        {
            "priority": {"type": "integer", "minimum": lo, "maximum": hi},
            "external_id": {
                "type": "string",
                "maxLength": v.EXTERNAL_ID_MAX,
                "description": "re-sending a batch with the same ids is idempotent",
            },
            "gold": {**ANY_JSON, "description": "a known answer: a gold item, never sent"},
            "required_capabilities": array(skill, 50),
            "answer_schema": {
                "type": "object",
                "description": "a JSON Schema for this item's answers (the project's if absent)",
            },
        },
    )


TASK_INPUT: Schema = _task_input()
INGEST: Schema = nullable(
    obj(
        {
            "state": {"enum": ["queued", "running", "retrying", "failed", "canceled", "done"]},
            "tasks_stored": INTEGER,
            "tasks_total": INTEGER,
            "error": nullable(STRING),
            "jobs": INTEGER,
        }
    )
)
