"""Turns untrusted input (GraphQL inputs or REST JSON, as plain dicts) into checked specs.

Every rule lives here once, so both APIs reject the same things with the same message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from taskroute.errors import BadInput
from taskroute.resolvers import answer_schema, layouts

# re-exported: callers check inputs through this module's `v.` names
from taskroute.resolvers.json_values import MAX_JSON_DEPTH as MAX_JSON_DEPTH
from taskroute.resolvers.json_values import json_text as json_text
from taskroute.resolvers.json_values import json_value as json_value

SKILL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
PRIORITY_RANGE = (-1000, 1000)
NAME_MAX = 200
EXTERNAL_ID_MAX = 200


@dataclass(frozen=True)
class TaskSpec:
    skill: str
    payload_json: str  # canonical JSON: the payload as stored, hashed and delivered
    priority: int = 0
    external_id: str | None = None
    gold: Any = None
    # capability tags the expert must carry (experts.capabilities)
    required_capabilities: tuple[str, ...] = ()
    # JSON Schema for this item's answers, replacing the project's (None: the project's)
    answer_schema: Any = None


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    deadline: datetime | None = None
    priority: int = 0
    lease_seconds: int = 1800
    pay_cents: int = 0
    min_quality: float = 0.0
    redundancy: int = 1
    max_retries: int = 3
    # seconds of silence (no claim, no heartbeat) before a claim returns to the pool
    heartbeat_timeout_seconds: int = 300
    tasks: list[TaskSpec] = field(default_factory=list)
    # JSON Schema every answer must match (None: any JSON)
    answer_schema: Any = None
    # when work is paid (docs/quality-and-payment.md)
    payment_policy: str = "on_submit"
    auto_approve_seconds: int = 259200
    override_seconds: int = 2592000
    pay_adjudicated_disagreements: bool = True
    flag_after_bad_item_releases: int = 2
    max_items_per_expert: int | None = None
    min_seconds_per_task: int | None = None
    too_fast_policy: str = "count"
    # how the workbench presents the tasks (layouts.py); PAIRWISE: the candidates' keys
    layout: str = "GENERIC"
    candidate_keys: list[str] | None = None
    # on_review: route review to experts holding review:<skill> (resolvers/reviews.py)
    expert_review: bool = False
    review_pay_cents: int = 0
    pay_corrected: bool = False
    # payloads are deleted this long after the project ended (canceled)
    payload_retention_seconds: int = 30 * 86400


# Payload retention bounds: 0 deletes the payloads as soon as the project ends; at
# most 10 years (a CHECK on projects holds the same bound).
PAYLOAD_RETENTION_MAX = 3650 * 86400


def skill(value: Any, where: str = "skill") -> str:
    if not isinstance(value, str) or not SKILL_RE.match(value):
        raise BadInput(
            f"{where} must be 1-64 letters, digits or _.:- starting with a letter or digit",
            field=where,
        )
    return value


def integer(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{where} must be an integer", field=where)
    if not lo <= value <= hi:
        raise BadInput(f"{where} must be between {lo} and {hi}", field=where)
    return value


def optional_integer(value: Any, where: str, lo: int, hi: int) -> int | None:
    return None if value is None else integer(value, where, lo, hi)


def number(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadInput(f"{where} must be a number", field=where)
    if not lo <= float(value) <= hi:
        raise BadInput(f"{where} must be between {lo} and {hi}", field=where)
    return float(value)


def text(value: Any, where: str, max_len: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{where} must be a non-empty string", field=where)
    if len(value) > max_len:
        raise BadInput(f"{where} must be at most {max_len} characters", field=where)
    # Postgres text holds neither NUL nor lone surrogates (they would fail in the driver).
    if "\x00" in value:
        raise BadInput(f"{where} must not contain NUL characters", field=where)
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise BadInput(f"{where} contains invalid Unicode", field=where) from exc
    return value


def deadline(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError as exc:
            raise BadInput("deadline must be an ISO 8601 date-time", field="deadline") from exc
    else:
        raise BadInput("deadline must be an ISO 8601 date-time", field="deadline")
    if dt is not None and dt.tzinfo is None:
        raise BadInput("deadline must carry a time zone (e.g. Z or +00:00)", field="deadline")
    if dt is not None:
        try:
            # Years 1 and 9999 with an offset fall outside what UTC (and the driver) can hold.
            dt.astimezone(UTC)
        except OverflowError as exc:
            raise BadInput("deadline is out of range", field="deadline") from exc
    return dt


def payload_json(value: Any, where: str, max_bytes: int) -> str:
    return json_value(value, where, max_bytes)


def task_spec(raw: Any, index: int, max_payload_bytes: int) -> TaskSpec:
    where = f"tasks[{index}]"
    if not isinstance(raw, dict):
        raise BadInput(f"{where} must be an object", field=where)
    unknown = set(raw) - {
        "skill",
        "priority",
        "payload",
        "external_id",
        "gold",
        "required_capabilities",
        "answer_schema",
    }
    if unknown:
        raise BadInput(f"{where} has unknown fields: {sorted(unknown)}", field=where)
    if "payload" not in raw or raw["payload"] is None:
        raise BadInput(f"{where}.payload is required", field=f"{where}.payload")
    ext = raw.get("external_id")
    if ext is not None:
        ext = text(ext, f"{where}.external_id", EXTERNAL_ID_MAX)
    schema = raw.get("answer_schema")
    if schema is not None:
        schema = answer_schema.check_schema(schema, f"{where}.answer_schema")
    return TaskSpec(
        skill=skill(raw.get("skill"), f"{where}.skill"),
        payload_json=payload_json(raw["payload"], f"{where}.payload", max_payload_bytes),
        priority=integer(raw.get("priority", 0), f"{where}.priority", *PRIORITY_RANGE),
        external_id=ext,
        gold=_gold(raw.get("gold"), f"{where}.gold", max_payload_bytes),
        required_capabilities=capabilities(
            raw.get("required_capabilities"), f"{where}.required_capabilities"
        ),
        answer_schema=schema,
    )


def check_gold(specs: list[TaskSpec], project_schema: Any) -> None:
    """Every gold answer matches its item's answer schema (else the project's)."""
    for i, s in enumerate(specs):
        if s.gold is not None:
            schema = project_schema if s.answer_schema is None else s.answer_schema
            answer_schema.check(schema, s.gold, f"tasks[{i}].gold")


def _gold(value: Any, where: str, max_bytes: int) -> Any:
    if value is not None:
        json_value(value, where, max_bytes)
    return value


def capabilities(raw: Any, where: str) -> tuple[str, ...]:
    """Capability tags: skill-like names (never a comma), at most 50, duplicates dropped."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > 50:
        raise BadInput(f"{where} must be a list of at most 50 tags", field=where)
    return tuple(dict.fromkeys(skill(c, where) for c in raw))


PRIORITY_CLASSES = {"high": 100, "normal": 0, "low": -100}


def priority_of(raw: dict[str, Any]) -> int:
    """`priority` (an integer) or `priority_class` (high|normal|low, its named levels: 100,
    0, -100); both may be given only if the integer lies in the named class."""
    cls = raw.get("priority_class")
    if cls is None:
        return integer(raw.get("priority", 0), "priority", *PRIORITY_RANGE)
    cls = getattr(cls, "value", cls)  # a GraphQL enum member or a plain string
    if not isinstance(cls, str) or cls.lower() not in PRIORITY_CLASSES:
        raise BadInput("priority_class must be high, normal or low", field="priority_class")
    level = PRIORITY_CLASSES[cls.lower()]
    if raw.get("priority") is None:
        return level
    value = integer(raw["priority"], "priority", *PRIORITY_RANGE)
    if priority_class_of(value) != cls.lower():
        raise BadInput(
            f"priority {value} is not in class {cls.lower()} (high >= 100, low <= -100)",
            field="priority_class",
        )
    return value


def priority_class_of(priority: int) -> str:
    """Same rule as the SQL function routing_class()."""
    if priority >= PRIORITY_CLASSES["high"]:
        return "high"
    if priority <= PRIORITY_CLASSES["low"]:
        return "low"
    return "normal"


def task_specs(raw: Any, max_tasks: int, max_payload_bytes: int) -> list[TaskSpec]:
    if not isinstance(raw, list):
        raise BadInput("tasks must be a list", field="tasks")
    if len(raw) > max_tasks:
        raise BadInput(f"at most {max_tasks} tasks per request", field="tasks")
    specs = [task_spec(t, i, max_payload_bytes) for i, t in enumerate(raw)]
    seen: set[str] = set()
    for s in specs:
        if s.external_id is not None:
            if s.external_id in seen:
                raise BadInput(f"external_id {s.external_id!r} appears twice", field="tasks")
            seen.add(s.external_id)
    return specs


PAYMENT_POLICIES = ("on_submit", "on_acceptance", "on_review")


def choice(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    value = getattr(value, "value", value)  # a GraphQL enum member
    if not isinstance(value, str) or value not in allowed:
        raise BadInput(f"{name} must be one of {', '.join(allowed)}", field=name)
    return str(value)


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise BadInput(f"{name} must be true or false", field=name)
    return value


def project_spec(raw: Any, max_tasks: int, max_payload_bytes: int) -> ProjectSpec:
    """`raw` uses snake_case keys (REST's shape; the GraphQL layer converts to it)."""
    if not isinstance(raw, dict):
        raise BadInput("the project must be a JSON object")
    allowed = {
        "name",
        "deadline",
        "priority",
        "lease_seconds",
        "pay_cents",
        "min_quality",
        "redundancy",
        "max_retries",
        "heartbeat_timeout_seconds",
        "tasks",
        "priority_class",
        "answer_schema",
        "payment_policy",
        "auto_approve_seconds",
        "override_seconds",
        "pay_adjudicated_disagreements",
        "payload_retention_seconds",
        "flag_after_bad_item_releases",
        "max_items_per_expert",
        "min_seconds_per_task",
        "too_fast_policy",
        "layout",
        "candidate_keys",
        "expert_review",
        "review_pay_cents",
        "pay_corrected",
    }
    unknown = set(raw) - allowed
    if unknown:
        raise BadInput(f"unknown fields: {sorted(unknown)}")
    schema = raw.get("answer_schema")
    if schema is not None:
        schema = answer_schema.check_schema(schema, "answer_schema")
    spec = ProjectSpec(
        name=text(raw.get("name"), "name", NAME_MAX),
        deadline=deadline(raw.get("deadline")),
        priority=priority_of(raw),
        lease_seconds=integer(raw.get("lease_seconds", 1800), "lease_seconds", 1, 7 * 86400),
        pay_cents=integer(raw.get("pay_cents", 0), "pay_cents", 0, 10_000_000),
        min_quality=number(raw.get("min_quality", 0.0), "min_quality", 0.0, 1.0),
        redundancy=integer(raw.get("redundancy", 1), "redundancy", 1, 5),
        max_retries=integer(raw.get("max_retries", 3), "max_retries", 0, 100),
        heartbeat_timeout_seconds=integer(
            raw.get("heartbeat_timeout_seconds", 300), "heartbeat_timeout_seconds", 1, 7 * 86400
        ),
        tasks=task_specs(raw.get("tasks", []), max_tasks, max_payload_bytes),
        answer_schema=schema,
        payment_policy=choice(
            raw.get("payment_policy", "on_submit"), "payment_policy", PAYMENT_POLICIES
        ),
        auto_approve_seconds=integer(
            raw.get("auto_approve_seconds", 259200), "auto_approve_seconds", 0, 30 * 86400
        ),
        override_seconds=integer(
            raw.get("override_seconds", 2592000), "override_seconds", 0, 365 * 86400
        ),
        pay_adjudicated_disagreements=boolean(
            raw.get("pay_adjudicated_disagreements", True), "pay_adjudicated_disagreements"
        ),
        flag_after_bad_item_releases=integer(
            raw.get("flag_after_bad_item_releases", 2), "flag_after_bad_item_releases", 1, 100
        ),
        max_items_per_expert=optional_integer(
            raw.get("max_items_per_expert"), "max_items_per_expert", 1, 10_000_000
        ),
        min_seconds_per_task=optional_integer(
            raw.get("min_seconds_per_task"), "min_seconds_per_task", 1, 86400
        ),
        too_fast_policy=choice(
            raw.get("too_fast_policy", "count"), "too_fast_policy", ("count", "exclude")
        ),
        payload_retention_seconds=integer(
            raw.get("payload_retention_seconds", 30 * 86400),
            "payload_retention_seconds",
            0,
            PAYLOAD_RETENTION_MAX,
        ),
        layout=(layout := choice(raw.get("layout", "GENERIC"), "layout", layouts.LAYOUTS)),
        candidate_keys=layouts.candidate_keys(raw.get("candidate_keys"), layout),
        expert_review=boolean(raw.get("expert_review", False), "expert_review"),
        review_pay_cents=integer(raw.get("review_pay_cents", 0), "review_pay_cents", 0, 10_000_000),
        pay_corrected=boolean(raw.get("pay_corrected", False), "pay_corrected"),
    )
    check_gold(spec.tasks, spec.answer_schema)
    layouts.check(spec.layout, spec.answer_schema)
    if spec.expert_review and spec.payment_policy != "on_review":
        raise BadInput(
            "expert_review needs payment_policy on_review (the answers wait for review)",
            field="expert_review",
        )
    return spec


def skills_filter(raw: Any) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) > 200:
        raise BadInput("skills must be a list of at most 200 skill names", field="skills")
    return [skill(s, "skills") for s in raw]
